//! The site tests' harness: a vault served by a real quire server on a loopback
//! port, and one HTTP/1.1 request per fresh connection over a real socket.

#![allow(dead_code, reason = "each test file uses part of the harness")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quire_server::{Config, Ctx, Server};
use quire_site::Site;

/// A running site on a copy of `examples/vault`.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    pub(crate) site: Site,
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) vault: tempfile::TempDir,
    pub(crate) _rt: tokio::runtime::Runtime,
    pub(crate) _watcher: Option<quire_site::watch::Watcher>,
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n.ends_with(".db") || n.contains(".db-") || n == "secret" || n == "sessions" {
            continue;
        }
        let dst = to.join(&name);
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

pub(crate) fn example_vault() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault")
}

pub(crate) fn start(watch: bool) -> Running {
    let vault = tempfile::tempdir().unwrap();
    copy_dir(&example_vault(), vault.path());
    start_on(vault, watch)
}

/// Stops `r` (server, site, cache) and serves its vault again, as after a restart.
pub(crate) fn restart(r: Running) -> Running {
    let Running {
        vault,
        site,
        ctx,
        _rt,
        _watcher,
        ..
    } = r;
    drop((_watcher, ctx, site));
    _rt.shutdown_timeout(Duration::from_secs(10));
    start_on(vault, false)
}

/// The example vault with `settings` (top-level `site.toml` keys) put before its own,
/// served.
pub(crate) fn start_with_settings(settings: &str) -> Running {
    let vault = tempfile::tempdir().unwrap();
    copy_dir(&example_vault(), vault.path());
    let file = vault.path().join(".quire/site.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{settings}\n{text}")).unwrap();
    start_on(vault, false)
}

/// Waits until the signed-in audiences' versions are made (the first signed-in
/// request starts them, in the background).
pub(crate) fn wait_for_audiences(r: &Running) {
    let t0 = std::time::Instant::now();
    while r
        .site
        .snapshot()
        .signed_in_versions(quire_vault::Visibility::Draft)
        .is_none()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "versions never made"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(crate) fn start_on(vault: tempfile::TempDir, watch: bool) -> Running {
    let site = Site::open(vault.path()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Config::default()
    };
    cfg.cache.path = vault.path().join(".quire-test-cache.vol");
    cfg.cache.size = quire_server::config::ByteSize(64 << 20);
    let (addr, ctx, watcher) = rt.block_on(async {
        let ctx = Ctx::with_upstream(cfg, Arc::new(site.clone())).unwrap();
        let server = Server::bind(ctx.clone()).await.unwrap();
        let addr = server.local_addr().unwrap();
        tokio::spawn(server.run(std::future::pending()));
        let w = watch.then(|| quire_site::watch::start(site.clone(), ctx.clone()).unwrap());
        (addr, ctx, w)
    });
    Running {
        addr,
        site,
        ctx,
        vault,
        _rt: rt,
        _watcher: watcher,
    }
}

/// A response: status, lower-cased header lines, body (as text, and as bytes).
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
    pub(crate) bytes: Vec<u8>,
}

impl Resp {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn hit(&self) -> bool {
        self.header("cache-status")
            .is_some_and(|s| s.contains("quire; hit"))
    }
}

/// One HTTP/1.1 request over a fresh connection, with extra header lines.
pub(crate) fn get_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    extra: &str,
    body: &str,
) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_raw(&raw)
}

/// `GET path` as a keep-alive client sends it (no `Connection` field, so the fast
/// path answers it, as it does a browser), then the end of the client's side.
pub(crate) fn get_fast(addr: SocketAddr, path: &str) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_raw(&raw)
}

/// Writes `text` to the vault file `path` and republishes, as the watcher would.
pub(crate) fn edit_file(r: &Running, path: &str, text: &str) {
    std::fs::write(r.vault.path().join(path), text).unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
}

/// A response read whole off a connection the server closed.
fn parse_raw(raw: &[u8]) -> Resp {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let rest = raw.get(split + 4..).unwrap_or_default();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let bytes = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Resp {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    }
}

pub(crate) fn dechunk(mut s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = s.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&s[..eol]);
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        let rest = &s[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        s = rest[n..].strip_prefix(b"\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// `GET path`, no extra header.
pub(crate) fn get(addr: SocketAddr, path: &str) -> Resp {
    get_with(addr, "GET", path, "", "")
}

/// A running site on a temporary vault of `(path, text)` notes.
pub(crate) fn start_with(files: &[(&str, &str)], watch: bool) -> Running {
    let vault = tempfile::tempdir().unwrap();
    for (p, text) in files {
        let path = vault.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    start_on(vault, watch)
}
