//! The MCP endpoint (`/_quire/mcp`) against a real quire server, as an agent's
//! client talks to it: a session that initializes, lists the tools and calls each;
//! what a call may read, by the caller's token (the attack class: reading past
//! one's audience); and hostile or malformed requests.

mod common;

use common::*;
use serde_json::{json, Value};

const A: &str =
    "---\nfree: true\ntitle: Alpha\ntags: [caching]\ndescription: The first note.\n---\n\
# Alpha\n\nSee [[b]] and [[secret]]. Word: quince.\n";
const B: &str = "---\nfree: true\ntitle: Beta\ntags: [caching]\n---\n# Beta\n\nBack to [[a]].\n";
const SECRET: &str =
    "---\ntitle: Secret plans\n---\nA private note: fig-31 quince. Links [[a]] and [[b]].\n";
const DRAFT: &str = "---\ntitle: Draft\ndraft: true\n---\nDraft text: walnut-77.\n";

fn site() -> Running {
    start_with(
        &[
            ("a.md", A),
            ("b.md", B),
            ("notes/secret.md", SECRET),
            ("draft.md", DRAFT),
        ],
        false,
    )
}

/// A reader `ada` in the vault's users file, and a token of hers.
fn reader_token(r: &Running) -> String {
    let dir = r.vault.path().join(".quire");
    let phc = quire_vault::readers::hash_password("correct horse battery");
    quire_vault::readers::write_user(
        &dir.join("users.toml"),
        "ada",
        quire_vault::readers::Role::Reader,
        &phc,
    )
    .unwrap();
    // The users file is read with the vault: republish, as the watcher would.
    quire_site::watch::republish(&r.site, &r.ctx);
    quire_vault::readers::add_token(&dir.join("tokens.toml"), "ada", Some("test")).unwrap()
}

/// One JSON-RPC call; the HTTP status and the parsed answer (Null when empty).
fn rpc(r: &Running, token: Option<&str>, body: &Value) -> (u16, Value) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let extra = format!(
        "{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    );
    let got = get_with(r.addr, "POST", "/_quire/mcp", &extra, &body.to_string());
    let v = serde_json::from_str(&got.body).unwrap_or(Value::Null);
    (got.status, v)
}

fn call(r: &Running, token: Option<&str>, tool: &str, args: Value) -> Value {
    let (status, v) = rpc(
        r,
        token,
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": tool, "arguments": args}}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["id"], 7);
    v["result"].clone()
}

fn urls(result: &Value, list: &str) -> Vec<String> {
    result["structuredContent"][list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {result}"))
        .iter()
        .map(|n| n["url"].as_str().unwrap().to_owned())
        .collect()
}

/// `initialize`, `notifications/initialized` and `tools/list`, as a client opens a
/// session.
fn handshake(r: &Running) {
    let (status, init) = rpc(
        r,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
    );
    assert_eq!(status, 200);
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "quire");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    // An older client's revision is answered in kind.
    let (_, old) = rpc(
        r,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-03-26"}}),
    );
    assert_eq!(old["result"]["protocolVersion"], "2025-03-26");
    let (status, none) = rpc(
        r,
        None,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!((status, none), (202, Value::Null));
    let (_, tools) = rpc(
        r,
        None,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["search", "get_note", "related", "backlinks", "list_notes"]
    );
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
}

#[test]
fn an_agent_session_initializes_lists_the_tools_and_calls_each() {
    let r = site();
    handshake(&r);

    let found = call(&r, None, "search", json!({"query": "quince"}));
    assert_eq!(urls(&found, "hits"), ["/a"]);
    let note = call(&r, None, "get_note", json!({"url": "/a"}));
    let md = note["content"][0]["text"].as_str().unwrap();
    assert!(
        md.contains("title: \"Alpha\"") && md.contains("# Alpha"),
        "{md}"
    );
    assert!(md.contains("[b](<http://site.test/b>)"), "{md}");
    assert_eq!(note["isError"], false);
    // The same note named as an agent may name it.
    let again = call(
        &r,
        None,
        "get_note",
        json!({"url": "http://site.test/a.md"}),
    );
    assert_eq!(again["content"][0]["text"], note["content"][0]["text"]);
    assert_eq!(
        urls(&call(&r, None, "backlinks", json!({"url": "/b"})), "notes"),
        ["/a"]
    );
    let related = call(&r, None, "related", json!({"url": "/a"}));
    assert!(
        urls(&related, "notes").contains(&"/b".to_owned()),
        "{related}"
    );
    let tagged = call(&r, None, "list_notes", json!({"tag": "caching"}));
    let mut t = urls(&tagged, "notes");
    t.sort();
    assert_eq!(t, ["/a", "/b"]);
    let all = call(&r, None, "list_notes", json!({"limit": 1}));
    assert_eq!(all["structuredContent"]["total"], 2);
    assert_eq!(urls(&all, "notes").len(), 1);
    let (_, pong) = rpc(
        &r,
        None,
        &json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    );
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
}

/// The attack: reading past one's audience. Anonymous calls read what the public
/// site shows, nothing of private or draft notes (not even that they exist); a
/// reader's token reads what she may, never drafts; a revoked or forged token, a
/// cross-site post, and a session cookie get nothing more than anonymous.
#[test]
fn mcp_calls_read_only_what_the_tokens_reader_may() {
    let r = site();
    let token = reader_token(&r);
    let secret = "/notes/secret";
    let hidden = call(&r, None, "get_note", json!({"url": secret}));
    assert_eq!(hidden["isError"], true);
    let absent = call(&r, None, "get_note", json!({"url": "/notes/nothing"}));
    assert_eq!(
        hidden["content"][0]["text"]
            .as_str()
            .unwrap()
            .replace(secret, "X"),
        absent["content"][0]["text"]
            .as_str()
            .unwrap()
            .replace("/notes/nothing", "X"),
        "a hidden note and a missing one read the same"
    );
    let anon = call(&r, None, "search", json!({"query": "quince"}));
    assert_eq!(urls(&anon, "hits"), ["/a"]);
    assert!(!anon.to_string().contains("fig-31"));
    assert_eq!(
        urls(&call(&r, None, "backlinks", json!({"url": "/a"})), "notes"),
        ["/b"]
    );
    let everything = call(&r, None, "list_notes", json!({"limit": 200})).to_string();
    assert!(!everything.contains("secret") && !everything.contains("Draft"));

    // Ada's token: her audience, private notes too, drafts still not.
    let t = Some(token.as_str());
    let md = call(&r, t, "get_note", json!({"url": secret}));
    assert!(
        md["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("fig-31"),
        "{md}"
    );
    let mut found = urls(&call(&r, t, "search", json!({"query": "quince"})), "hits");
    found.sort();
    assert_eq!(found, ["/a", secret]);
    let mut back = urls(&call(&r, t, "backlinks", json!({"url": "/a"})), "notes");
    back.sort();
    assert_eq!(back, ["/b", secret]);
    assert_eq!(
        call(&r, t, "get_note", json!({"url": "/draft"}))["isError"],
        true
    );
    assert!(!call(&r, t, "search", json!({"query": "walnut"}))
        .to_string()
        .contains("/draft"));

    // A forged token, then hers once revoked: refused, never read as anyone.
    let forged = format!("quire_{}", "0".repeat(64));
    for bad in [forged.as_str(), "not-a-token"] {
        let (status, _) = rpc(
            &r,
            Some(bad),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        );
        assert_eq!(status, 401, "{bad}");
    }
    let tokens = r.vault.path().join(".quire/tokens.toml");
    assert_eq!(
        quire_vault::readers::revoke_tokens(&tokens, "ada").unwrap(),
        1
    );
    let (status, _) = rpc(&r, t, &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(status, 401, "a revoked token counts at once");

    // Another site's page posting for a browser: refused before anything is read.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "list_notes", "arguments": {}}})
    .to_string();
    let cross = get_with(
        r.addr,
        "POST",
        "/_quire/mcp",
        "Content-Type: application/json\r\nSec-Fetch-Site: cross-site\r\nOrigin: https://evil.test\r\n",
        &body,
    );
    assert_eq!(cross.status, 403);
}

/// Malformed, oversized and misdirected requests get the answers the protocol
/// gives them, and the admin API around the endpoint still needs its token.
#[test]
fn mcp_refuses_malformed_input_and_leaves_the_admin_api_shut() {
    let r = site();
    let raw = |body: &str, extra: &str| {
        let e = format!("Content-Type: application/json\r\n{extra}");
        get_with(r.addr, "POST", "/_quire/mcp", &e, body)
    };
    let bad = raw("{not json", "");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("-32700"), "{}", bad.body);
    let batch = raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, "");
    assert_eq!(batch.status, 400);
    assert!(batch.body.contains("-32600"), "{}", batch.body);
    let (_, unknown) = rpc(
        &r,
        None,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}),
    );
    assert_eq!(unknown["error"]["code"], -32601);
    let (_, no_tool) = rpc(
        &r,
        None,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "rm"}}),
    );
    assert_eq!(no_tool["error"]["code"], -32602);
    let (_, args) = rpc(
        &r,
        None,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "search", "arguments": "quince"}}),
    );
    assert_eq!(args["error"]["code"], -32602);
    let version = raw(
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        "MCP-Protocol-Version: 1999-01-01\r\n",
    );
    assert_eq!(version.status, 400);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"search","arguments":{{"query":"{}"}}}}}}"#,
        "q".repeat(64 << 10)
    );
    assert_eq!(raw(&huge, "").status, 413);
    let get = get_with(r.addr, "GET", "/_quire/mcp", "", "");
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    // Only the endpoint itself is the site's: the rest of /_quire/ is the admin
    // API, token and all, however the path is spelt.
    for path in [
        "/_quire/metrics",
        "/_quire/mcp/../metrics",
        "/%5fquire/metrics",
        "/_quire/mcpx",
    ] {
        let got = get_with(r.addr, "GET", path, "", "");
        assert!(
            matches!(got.status, 401 | 403 | 404),
            "{path}: {}",
            got.status
        );
        assert!(!got.body.contains("quire_requests_total"), "{path}");
    }
}

/// The limit on what one call returns: a note whose markdown is past 256 KiB comes
/// cut, saying so, whole in its own `.md`.
#[test]
fn get_note_returns_at_most_256_kib() {
    let long = format!("---\nfree: true\n---\n{}\n", "quince jam. ".repeat(40_000));
    let r = start_with(&[("long.md", long.as_str())], false);
    let got = call(&r, None, "get_note", json!({"url": "/long"}));
    let text = got["content"][0]["text"].as_str().unwrap();
    assert!(text.len() <= (256 << 10) + 128, "{} bytes", text.len());
    assert!(text.ends_with("[… cut: the note is longer than this tool returns]\n"));
    assert!(get(r.addr, "/long.md").body.len() > 400_000);
}
