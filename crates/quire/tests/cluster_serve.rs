//! Publishing mode across nodes, end to end: a real `redis-server` and two real
//! `quire serve` processes on copies of the example vault, sharing `[cluster]`.
//! A reader signed in on one node is signed in on the other; a sign-out on one
//! holds on both (a copied cookie too, and on a node restarted afterwards); with
//! Redis down a sign-out answers 503 and says so; `/_views` shows the cluster's
//! totals. Ignored, saying so, where `redis-server` is not installed (`build.rs`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{eventually, Process, QUIRE};
use quire_testkit::redis::Redis;
const TOKEN: &str = "cluster-serve-admin-token-0123";
/// A private note of the example vault: readers only.
const PRIVATE: &str = "/private/budget-2026";

/// One `quire serve` node.
struct Node(Process);

impl Node {
    fn start(dir: &Path, name: &str, redis: &str) -> Node {
        let vault = dir.join(format!("vault-{name}"));
        if !vault.exists() {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault");
            assert!(Command::new("cp")
                .arg("-r")
                .arg(&src)
                .arg(&vault)
                .status()
                .unwrap()
                .success());
        }
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "admin_token = \"{TOKEN}\"\n[cache]\npath = \"{vol}\"\nsize = \"16MiB\"\n\
                 [cluster]\nredis = \"{redis}\"\nnode = \"{name}\"\n\
                 session_secret_file = \"{secret}\"\n",
                vol = dir.join(format!("{name}.vol")).display(),
                secret = dir.join("secret").display(),
            ),
        )
        .unwrap();
        Node(Process::start(
            Command::new(QUIRE)
                .arg("serve")
                .arg(&vault)
                .args(["--listen", "127.0.0.1:0", "--no-watch", "--workers", "1"])
                .arg("--config")
                .arg(&config),
        ))
    }

    /// Status, head and body of one request (connection closed after it).
    fn send(&self, method: &str, path: &str, headers: &str, body: &str) -> (u16, String, String) {
        let mut s = TcpStream::connect(self.0.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\n{headers}content-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, head.to_owned(), body.to_owned())
    }

    /// `GET path` as the holder of `cookie`: its status.
    fn get_as(&self, path: &str, cookie: &str) -> u16 {
        self.send("GET", path, &format!("cookie: {cookie}\r\n"), "")
            .0
    }

    /// Signs `reader` in; the session cookie (`quire_session=...`).
    fn sign_in(&self) -> String {
        self.sign_in_as("reader", "reader-demo-password")
    }

    /// Signs `name` in; the session cookie.
    fn sign_in_as(&self, name: &str, password: &str) -> String {
        let (status, head, _) = self.send(
            "POST",
            "/login",
            "content-type: application/x-www-form-urlencoded\r\n",
            &format!("name={name}&password={password}&next=/"),
        );
        assert_eq!(status, 303, "{head}");
        session(&head).expect("a session cookie")
    }

    fn sign_out(&self, cookie: &str) -> (u16, String, String) {
        self.send("POST", "/logout", &format!("cookie: {cookie}\r\n"), "")
    }
}

/// The `quire_session=...` pair a `Set-Cookie` field sets, if any.
fn session(head: &str) -> Option<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.trim().split(';').next())
        .find(|pair| pair.starts_with("quire_session=") && pair.len() > "quire_session=".len())
        .map(str::to_owned)
}

/// Redis and two nodes. Panics when Redis does not start: the tests that call it are
/// ignored where Redis is not installed (`build.rs`), never passed.
fn cluster(dir: &Path) -> (Redis, Node, Node) {
    let redis = Redis::start().expect("redis-server starts");
    std::fs::write(dir.join("secret"), "7f3a9c0e5b21d4f8a6c3e9b0d7f1a2c4\n").unwrap();
    let a = Node::start(dir, "a", &redis.url());
    let b = Node::start(dir, "b", &redis.url());
    (redis, a, b)
}

/// A reader signs in on node a and reads a private note on node b; signing out on
/// a ends the session on b too, for a copy of the cookie, and on a node started
/// after the sign-out.
#[test]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
fn a_session_signs_in_on_every_node_and_a_sign_out_holds_on_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let (redis, a, b) = cluster(dir.path());
    assert_eq!(a.get_as(PRIVATE, ""), 404, "hidden from strangers");
    let cookie = a.sign_in();
    assert_eq!(a.get_as(PRIVATE, &cookie), 200);
    assert_eq!(b.get_as(PRIVATE, &cookie), 200, "signed in on b as well");
    let other_device = b.sign_in();

    let (status, head, _) = a.sign_out(&cookie);
    assert_eq!(status, 303, "{head}");
    assert_eq!(a.get_as(PRIVATE, &cookie), 404, "at once on a");
    assert!(
        eventually(|| b.get_as(PRIVATE, &cookie) == 404),
        "the copy of the cookie on b"
    );
    assert_eq!(b.get_as(PRIVATE, &other_device), 404, "every device");
    assert_eq!(
        redis.cli(&["HGET", "quire:invalidations:sessions", "u:reader"]),
        "1"
    );

    drop(b);
    let c = Node::start(dir.path(), "c", &redis.url());
    assert_eq!(c.get_as(PRIVATE, &cookie), 404, "a node started afterwards");
    let again = c.sign_in();
    assert_eq!(
        a.get_as(PRIVATE, &again),
        200,
        "a new sign-in works everywhere"
    );
}

/// With Redis down, a sign-out cannot reach the other nodes: it answers 503 and
/// says so (clearing the cookie in this browser), and the session is not ended
/// on one node only while the others still honour it: past the cut-off window
/// no node that cannot read the log honours any cookie (it cannot know who
/// signed out elsewhere), so both refuse it together.
#[test]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
fn a_sign_out_the_cluster_cannot_record_is_a_loud_503() {
    let dir = tempfile::tempdir().unwrap();
    let (mut redis, a, b) = cluster(dir.path());
    let cookie = a.sign_in();
    redis.stop();
    let (status, head, body) = a.sign_out(&cookie);
    assert_eq!(status, 503, "{head}");
    assert!(body.contains("this browser only"), "{body}");
    assert!(head.to_ascii_lowercase().contains("max-age=0"), "{head}");
    assert!(
        eventually(|| a.get_as(PRIVATE, &cookie) != 200 && b.get_as(PRIVATE, &cookie) != 200),
        "cut off from the log, both nodes fail closed"
    );
}

/// Views read on either node add up in `/_views` on both.
#[test]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
fn view_counts_are_the_clusters_totals() {
    let dir = tempfile::tempdir().unwrap();
    let (_redis, a, b) = cluster(dir.path());
    let (status, _, _) = a.send("GET", "/about", "", "");
    assert_eq!(status, 200);
    for _ in 0..3 {
        assert_eq!(a.send("GET", "/about", "", "").0, 200);
        assert_eq!(b.send("GET", "/about", "", "").0, 200);
    }
    let cookie = a.sign_in_as("admin", "admin-demo-password");
    let row = |n: &Node| {
        let (status, _, body) = n.send("GET", "/_views", &format!("cookie: {cookie}\r\n"), "");
        assert_eq!(status, 200);
        body
    };
    assert!(
        eventually(|| row(&b).contains(">7</td>")),
        "7 views of /about over both nodes: {}",
        row(&b)
    );
    assert!(row(&a).contains("Totals over every node"), "{}", row(&a));
}

/// Redis lost the sign-out table (restarted empty, flushed): the next sign-out starts
/// a new epoch at generation 1, which a node holding the old table must not read as
/// an older generation and ignore. Every node reads the table again and refuses the
/// signed-out cookie.
#[test]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
fn a_sign_out_after_redis_lost_the_table_still_holds_on_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let (redis, a, b) = cluster(dir.path());
    let first = a.sign_in();
    assert_eq!(a.sign_out(&first).0, 303);
    let cookie = a.sign_in();
    assert!(
        eventually(|| b.get_as(PRIVATE, &cookie) == 200),
        "a new session"
    );
    assert_eq!(redis.cli(&["DEL", "quire:invalidations:sessions"]), "1");
    let (status, head, _) = a.sign_out(&cookie);
    assert_eq!(status, 303, "{head}");
    assert_eq!(
        redis.cli(&["HGET", "quire:invalidations:sessions", "u:reader"]),
        "1"
    );
    for n in [&a, &b] {
        assert!(
            eventually(|| n.get_as(PRIVATE, &cookie) == 404),
            "the signed-out cookie on every node"
        );
    }
    let again = b.sign_in();
    assert_eq!(
        a.get_as(PRIVATE, &again),
        200,
        "the new epoch signs in everywhere"
    );
}

/// A cluster node's upstream wraps the site (peer fill): what the site answers
/// itself still reaches it there — the MCP endpoint, markdown by `Accept`.
#[test]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
fn agents_get_the_mcp_endpoint_and_markdown_on_a_cluster_node() {
    let dir = tempfile::tempdir().unwrap();
    let (_redis, a, _b) = cluster(dir.path());
    let (status, head, body) = a.send(
        "POST",
        "/_quire/mcp",
        "content-type: application/json\r\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(status, 200, "{head}\n{body}");
    assert_eq!(body, r#"{"id":1,"jsonrpc":"2.0","result":{}}"#);
    let (status, head, body) = a.send("GET", "/about", "accept: text/markdown\r\n", "");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/markdown"),
        "{head}"
    );
    assert!(body.starts_with("---\ntitle:"), "{body}");
}
