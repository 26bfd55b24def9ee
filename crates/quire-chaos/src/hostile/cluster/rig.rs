//! Three real `quire proxy` nodes with `[cluster]` and peer fill, one real
//! `redis-server`, the chaos origin (every body names its URL and version), and a
//! [`Relay`] between each node and Redis; the requests the cases make (reads,
//! purges with `wait=all`, metrics) and the owner of a URL as the nodes see it.
//!
//! Key decisions:
//! - **Every node's link goes through a relay**, idle until a case slows or
//!   silences it, so any node can be the lagging or cut-off one.
//! - **The owner is found from outside**: a URL is first asked of node 0, and the
//!   node whose `quire_cluster_peer_fills_total` moved (`own` on node 0,
//!   `for_peer` on another) owns it. The suite never reimplements quire's key or
//!   its rendezvous hash, so it cannot agree with a wrong one.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::Method;

use super::redis::Redis;
use super::relay::Relay;
use crate::client::{Conn, Proto};
use crate::content::{Catalog, HOST};
use crate::hostile::Env;
use crate::origin::Origin;
use crate::quire::{self, Quire, ADMIN_TOKEN};

/// How many nodes a rig runs.
pub(crate) const NODES: usize = 3;

/// URLs in the rig's catalogue (each case takes its own from it).
const URLS: usize = 4096;

/// One node: its name, its address, its link to Redis.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) addr: SocketAddr,
    pub(crate) relay: Relay,
    _quire: Quire,
}

/// The cluster a case runs against.
#[derive(Debug)]
pub(crate) struct Rig {
    pub(crate) redis: tokio::sync::Mutex<Redis>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) nodes: Vec<Node>,
    _origin: Origin,
}

/// One answer, as the judge needs it.
#[derive(Debug, Clone)]
pub(crate) struct Read {
    pub(crate) status: u16,
    /// The version the body claims, when its bytes are exactly that version's.
    pub(crate) version: Option<u32>,
    /// Whether the body is not the bytes of the version it claims (or claims none).
    pub(crate) wrong_bytes: bool,
    pub(crate) hit: bool,
    pub(crate) cache_status: String,
}

/// A purge's answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ack {
    pub(crate) status: u16,
    pub(crate) all_applied: bool,
    /// Each node's state in the answer (`applied`, `pending`, `unreachable`).
    pub(crate) nodes: BTreeMap<String, String>,
    pub(crate) body: String,
}

impl Ack {
    /// Whether the purge was taken (the log has it and this node applied it).
    pub(crate) fn ok(&self) -> bool {
        self.status == 200
    }

    /// Whether `node` is named as having applied the purge.
    pub(crate) fn applied(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|s| s == "applied")
    }
}

/// How a node is started: its clock's offset (`FAKETIME` through libfaketime).
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeOpts {
    pub(crate) faketime: Option<(std::path::PathBuf, String)>,
}

impl Rig {
    /// Starts Redis, the origin and [`NODES`] nodes (`opts[i]` for node `i`).
    pub(crate) async fn start(env: &Env, case: &str, opts: &[NodeOpts]) -> anyhow::Result<Rig> {
        let dir = env.dir.join(case);
        std::fs::create_dir_all(&dir)?;
        let redis = Redis::start(&dir.join("redis")).await?;
        let catalog = Arc::new(Catalog::new(7, URLS));
        let origin = Origin::start(catalog.clone()).await?;
        let addrs: Vec<SocketAddr> = (0..NODES)
            .map(|_| quire::free_addr())
            .collect::<anyhow::Result<_>>()?;
        let peers: String = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("n{i} = \"http://{a}\"\n"))
            .collect();
        let mut nodes = Vec::new();
        for (i, &addr) in addrs.iter().enumerate() {
            let relay = Relay::start(redis.port).await?;
            let text = format!(
                "listen = \"{addr}\"\norigin = \"http://{}\"\n\n[cluster]\nredis = \"{}\"\n\
                 node = \"n{i}\"\npeer_timeout = \"1s\"\n\n[cluster.peers]\n{peers}\n\
                 [cache]\npath = \"{}\"\nsize = \"64 MiB\"\n",
                origin.addr(),
                relay.url(),
                dir.join(format!("n{i}.vol")).display()
            );
            let config = dir.join(format!("n{i}.toml"));
            std::fs::write(&config, text)?;
            let log = dir.join(format!("n{i}.log"));
            env.watch_log(&log);
            let args: Vec<OsString> = vec!["proxy".into(), "--config".into(), config.into()];
            let mut q = Quire::new(&env.exe, args, addr, log);
            if let Some((lib, offset)) = opts.get(i).and_then(|o| o.faketime.clone()) {
                q.env("LD_PRELOAD", lib);
                q.env("FAKETIME", offset);
                // Only the wall clock is off; timers keep real time.
                q.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
                q.env("FAKETIME_NO_CACHE", "1");
            }
            q.start(Duration::from_secs(30))
                .await
                .with_context(|| format!("starting node n{i}"))?;
            nodes.push(Node {
                name: format!("n{i}"),
                addr,
                relay,
                _quire: q,
            });
        }
        Ok(Rig {
            redis: tokio::sync::Mutex::new(redis),
            catalog,
            nodes,
            _origin: origin,
        })
    }

    /// `GET` of catalogue URL `i` on node `node`, judged byte for byte.
    pub(crate) async fn read(&self, node: usize, i: usize) -> anyhow::Result<Read> {
        let mut conn = connect(self.nodes[node].addr).await?;
        let r = conn
            .send(
                Method::GET,
                &Catalog::path(i),
                HOST,
                &[],
                Bytes::new(),
                None,
            )
            .await
            .map_err(|f| anyhow::anyhow!("GET on n{node}: {}", f.name()))?;
        let body = r.body.clone().unwrap_or_default();
        let claimed = Catalog::claimed(&body)
            .filter(|(p, _)| *p == Catalog::path(i))
            .map(|(_, v)| v);
        let exact = claimed.is_some_and(|v| self.catalog.body(i, v) == body);
        Ok(Read {
            status: r.status,
            version: claimed.filter(|_| exact),
            wrong_bytes: r.status == 200 && !exact,
            hit: r.hit(),
            cache_status: r.header("cache-status").unwrap_or("").to_string(),
        })
    }

    /// A hard purge of URL `i` with `wait=all`, sent to node `node`.
    pub(crate) async fn purge(&self, node: usize, i: usize) -> anyhow::Result<Ack> {
        let mut conn = connect(self.nodes[node].addr).await?;
        let body = serde_json::json!({ "urls": [Catalog::url(i)] }).to_string();
        let fields = [
            ("authorization", format!("Bearer {ADMIN_TOKEN}")),
            ("content-type", "application/json".to_string()),
        ];
        let r = conn
            .send(
                Method::POST,
                "/_quire/purge?wait=all",
                HOST,
                &fields,
                Bytes::from(body),
                None,
            )
            .await
            .map_err(|f| anyhow::anyhow!("purge on n{node}: {}", f.name()))?;
        let text = String::from_utf8_lossy(&r.body.unwrap_or_default()).into_owned();
        Ok(parse_ack(r.status, &text))
    }

    /// A metric of node `node` (labels included in `name`); 0 when absent.
    pub(crate) async fn metric(&self, node: usize, name: &str) -> anyhow::Result<f64> {
        let m = quire::metrics(self.nodes[node].addr)
            .await
            .with_context(|| format!("metrics of n{node}"))?;
        Ok(quire::metric(&m, name))
    }

    /// The node that owns URL `i`, found by asking node 0 for it (a first request:
    /// the URL must not have been asked before).
    pub(crate) async fn owner(&self, i: usize) -> anyhow::Result<usize> {
        const OWN: &str = "quire_cluster_peer_fills_total{result=\"own\"}";
        const FOR_PEER: &str = "quire_cluster_peer_fills_total{result=\"for_peer\"}";
        let own = self.metric(0, OWN).await?;
        let mut for_peer = Vec::new();
        for n in 1..NODES {
            for_peer.push(self.metric(n, FOR_PEER).await?);
        }
        let r = self.read(0, i).await?;
        anyhow::ensure!(
            r.status == 200,
            "GET {} on n0: {}",
            Catalog::path(i),
            r.status
        );
        if self.metric(0, OWN).await? > own {
            return Ok(0);
        }
        for n in 1..NODES {
            if self.metric(n, FOR_PEER).await? > for_peer[n - 1] {
                return Ok(n);
            }
        }
        anyhow::bail!("no node counted the fill of {}", Catalog::path(i))
    }

    /// `want` fresh URLs from `from` on that `pick` accepts by owner, each asked once
    /// on node 0 (so node 0 and the owner hold a copy); the next unused index.
    pub(crate) async fn urls_owned(
        &self,
        from: usize,
        want: usize,
        pick: impl Fn(usize) -> bool,
    ) -> anyhow::Result<(Vec<(usize, usize)>, usize)> {
        let mut out = Vec::new();
        let mut i = from;
        while out.len() < want {
            anyhow::ensure!(i < self.catalog.len(), "the catalogue ran out of URLs");
            let owner = self.owner(i).await?;
            if pick(owner) {
                out.push((i, owner));
            }
            i += 1;
        }
        Ok((out, i))
    }

    /// Asks every node for URL `i`, so each holds a copy of its current version.
    pub(crate) async fn warm(&self, i: usize) -> anyhow::Result<()> {
        for n in 0..NODES {
            let r = self.read(n, i).await?;
            anyhow::ensure!(
                r.status == 200,
                "warming {} on n{n}: {}",
                Catalog::path(i),
                r.status
            );
        }
        Ok(())
    }

    /// Waits (at most `within`) until no node says it is cut off from the log.
    pub(crate) async fn caught_up(&self, within: Duration) -> anyhow::Result<Duration> {
        let began = std::time::Instant::now();
        while began.elapsed() < within {
            let mut cut = 0.0;
            for n in 0..NODES {
                cut += self.metric(n, "quire_cluster_cut_off").await.unwrap_or(1.0);
            }
            if cut == 0.0 {
                return Ok(began.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("a node still said it was cut off from the log {within:?} after healing")
    }
}

async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
    Conn::connect(addr, Proto::H1, None)
        .await
        .map_err(|f| anyhow::anyhow!("connecting to {addr}: {}", f.name()))
}

/// A purge answer's status and JSON.
fn parse_ack(status: u16, text: &str) -> Ack {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let cluster = &v["cluster"];
    let nodes = cluster["nodes"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, s)| (k.clone(), s.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    Ack {
        status,
        all_applied: cluster["all_applied"].as_bool().unwrap_or(false),
        nodes,
        body: text.chars().take(300).collect(),
    }
}

/// libfaketime's preload library, if installed.
pub(crate) fn libfaketime() -> Option<std::path::PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ]
    .iter()
    .map(Path::new)
    .find(|p| p.is_file())
    .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_purge_answer_names_each_node() {
        let text = r#"{"purged":1,"cluster":{"entry":"1-0","all_applied":false,
            "nodes":{"n0":"applied","n1":"pending","n2":"unreachable"}}}"#;
        let a = parse_ack(200, text);
        assert!(a.ok() && !a.all_applied);
        assert!(a.applied("n0") && !a.applied("n1") && !a.applied("n2"));
        let refused = parse_ack(503, r#"{"error":"cluster bus unavailable"}"#);
        assert!(!refused.ok() && refused.nodes.is_empty() && !refused.all_applied);
    }
}
