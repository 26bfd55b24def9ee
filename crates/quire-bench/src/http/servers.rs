//! The servers `quire bench http` starts itself and stops by PID: `quire serve` or
//! `quire proxy` (this binary, release build), and the peers nginx `proxy_cache` and
//! Varnish (Debian's packages) with an equivalent cache configuration in front of
//! the same origin. Each is pinned with `taskset` to the server CPUs, runs one
//! worker, and lives in a scratch directory of its own that goes away with it.
//!
//! Key decisions:
//! - **Equivalent, not default, peer configurations**: every peer caches a 200 for an
//!   hour whatever the origin's `Cache-Control` says (quire serve's pages say
//!   `no-cache` to browsers and address quire in `CDN-Cache-Control`, which no peer
//!   reads), stores the gzip variant the origin sends, keeps no access log (Varnish
//!   logs to shared memory only), and answers with `X-Cache: HIT|MISS` so the
//!   warm-up can check every URL is a hit. The origin's own `Cache-Status` is hidden
//!   from their clients, so a hit is never read off the origin's header.
//! - **One worker on the server CPUs**, as quire runs (`--workers 1`): nginx with
//!   `worker_processes 1` and `worker_cpu_affinity`, Varnish under `taskset` (its
//!   threads all share the pinned CPUs).
//! - **The machine's floor** (`--peer floor`, [`super::floor`]) is this binary's
//!   `quire bench floor`, pinned the same way: a response of the corpus's mean size
//!   written once per request, nothing parsed. It does not answer `Connection:
//!   close`, so it is probed by connecting only, and never warmed.
//! - **`--signed-in` serves a copy of the vault** ([`quire_signed_in`]), as the
//!   peers' origin does: the benchmark's reader is added to the copy, never to the
//!   user's vault.
//! - **CPU is counted over the process tree** (nginx's master and worker, Varnish's
//!   manager and child), from `/proc`.
//! - **Over TLS (`--tls`), one listener each with the same certificate**: quire gets
//!   `--tls-cert`/`--tls-key` (HTTPS with ALPN `h2` and `http/1.1` on `--listen`),
//!   nginx `listen ... ssl` with HTTP/2 on, TLS 1.3 only, the clients' one cipher
//!   suite and group, and `ssl_session_cache`. Varnish has no TLS and is refused
//!   before anything starts.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use super::procstat;
use super::tls::TestPki;
use super::urls;

/// What a started server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `quire serve VAULT`.
    QuireServe,
    /// `quire proxy --origin URL`.
    QuireProxy,
    /// nginx `proxy_cache`.
    Nginx,
    /// Varnish.
    Varnish,
    /// The machine's floor (`quire bench floor`).
    Floor,
    /// The floor on tokio (`quire bench floor --tokio`).
    FloorTokio,
    /// The floor over as many distinct responses as the corpus has pages.
    FloorCorpus,
}

impl Kind {
    /// The server's name in tables and JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::QuireServe | Kind::QuireProxy => "quire",
            Kind::Nginx => "nginx",
            Kind::Varnish => "varnish",
            Kind::Floor => "floor",
            Kind::FloorTokio => "floor-tokio",
            Kind::FloorCorpus => "floor-corpus",
        }
    }
}

/// A server this benchmark started; stopped, and its directory removed, when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    /// What it is.
    pub kind: Kind,
    /// `host:port` it listens on.
    pub host: String,
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// The vault copy a peers' origin serves, removed after the server stopped.
    vault_copy: Option<tempfile::TempDir>,
}

impl Server {
    /// The process id of its main process.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// CPU jiffies of its whole process tree so far.
    pub(crate) fn cpu_jiffies(&self) -> Option<u64> {
        self.pid().and_then(procstat::tree)
    }

    /// Stops it (SIGTERM: quire drains, nginx and Varnish exit; SIGKILL after 5 s)
    /// and waits.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            for _ in 0..100 {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free loopback port (bound, then released for the server to take).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A scratch directory other users can enter: nginx's workers and Varnish's child
/// drop root's privileges and must still read their files.
pub(crate) fn scratch() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("quire-bench-").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// How [`spawn`] sees that a server is up.
#[derive(Debug, Clone, Copy)]
enum Probe<'a> {
    /// It answers a GET of this path (through the client).
    Get(&'a str, &'a urls::Client),
    /// It accepts a connection.
    Connect,
}

impl Probe<'_> {
    fn up(self, host: &str) -> bool {
        match self {
            Probe::Get(path, client) => client.get(host, path, "identity").is_ok(),
            Probe::Connect => std::net::TcpStream::connect(host).is_ok(),
        }
    }
}

/// Starts `argv` under `taskset -c cpus` (no pinning when `cpus` is empty), its
/// output in `dir/log`, and waits until `host` passes `probe`.
fn spawn(
    kind: Kind,
    argv: &[&std::ffi::OsStr],
    cpus: &str,
    dir: tempfile::TempDir,
    (host, probe): (String, Probe<'_>),
) -> anyhow::Result<Server> {
    let log = std::fs::File::create(dir.path().join("log"))?;
    let mut cmd = if cpus.is_empty() {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..]);
        c
    } else {
        let mut c = Command::new("taskset");
        c.args(["-c", cpus]).args(argv);
        c
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", argv[0].to_string_lossy()))?;
    let mut s = Server {
        kind,
        host,
        child: Some(child),
        dir,
        vault_copy: None,
    };
    for _ in 0..600 {
        if probe.up(&s.host) {
            return Ok(s);
        }
        if let Some(status) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            let log = std::fs::read_to_string(s.dir.path().join("log")).unwrap_or_default();
            anyhow::bail!(
                "{} exited ({status}) before answering: {}",
                kind.name(),
                log.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    anyhow::bail!("{} did not answer within 60 s", kind.name())
}

/// Starts `quire serve VAULT` (when `origin` is `None`) or `quire proxy --origin`,
/// one worker, a fresh cache volume, pinned to `cpus`, with `config` when given,
/// serving HTTPS with `tls`'s certificate when given.
pub(crate) fn quire(
    vault: Option<&Path>,
    origin: Option<&str>,
    config: Option<&Path>,
    cpus: &str,
    tls: Option<&TestPki>,
) -> anyhow::Result<Server> {
    let dir = scratch()?;
    let port = free_port()?;
    let exe = std::env::current_exe().context("finding the quire binary")?;
    let listen = format!("127.0.0.1:{port}");
    let cache = dir.path().join("cache.vol");
    let mut argv: Vec<std::ffi::OsString> = vec![exe.into()];
    let kind = match (vault, origin) {
        (Some(v), _) => {
            argv.extend(["serve".into(), v.into(), "--no-watch".into()]);
            Kind::QuireServe
        }
        (None, Some(o)) => {
            argv.extend(["proxy".into(), "--origin".into(), o.into()]);
            Kind::QuireProxy
        }
        (None, None) => anyhow::bail!("quire needs a vault or an origin"),
    };
    argv.extend([
        "--listen".into(),
        listen.clone().into(),
        "--workers".into(),
        "1".into(),
        "--cache".into(),
        cache.into(),
    ]);
    if let Some(c) = config {
        argv.extend(["--config".into(), c.into()]);
    }
    if let Some(t) = tls {
        argv.extend([
            "--tls-cert".into(),
            t.cert.clone().into(),
            "--tls-key".into(),
            t.key.clone().into(),
        ]);
    }
    let argv: Vec<&std::ffi::OsStr> = argv.iter().map(|a| a.as_os_str()).collect();
    let client = client(tls);
    spawn(
        kind,
        &argv,
        cpus,
        dir,
        (listen, Probe::Get("/_quire/health", &client)),
    )
}

/// The harness's client for a server with `tls` (or without).
pub(crate) fn client(tls: Option<&TestPki>) -> urls::Client {
    tls.map_or(urls::Client::Plain, |t| urls::Client::Tls(t.client.clone()))
}

/// Starts `quire serve` on a copy of `vault` (its search and view databases left
/// behind, so two servers of one vault never share a SQLite file): the peers'
/// origin in serve mode.
pub(crate) fn quire_origin(vault: &Path, cpus: &str) -> anyhow::Result<Server> {
    let copy = tempfile::Builder::new()
        .prefix("quire-bench-vault-")
        .tempdir()?;
    copy_vault(vault, copy.path())
        .with_context(|| format!("copying {} for the peers' origin", vault.display()))?;
    let mut server = quire(Some(copy.path()), None, None, cpus, None)?;
    server.vault_copy = Some(copy);
    Ok(server)
}

/// Starts `quire serve` on a copy of `vault` (as [`quire_origin`] copies it) given
/// a reader of the benchmark's own and a session secret of its own
/// (`signin::prepare_copy`), for `--signed-in`; `vault` itself is not written.
/// Returns the server and the reader's password.
pub(crate) fn quire_signed_in(
    vault: &Path,
    config: Option<&Path>,
    cpus: &str,
    tls: Option<&TestPki>,
) -> anyhow::Result<(Server, String)> {
    let copy = tempfile::Builder::new()
        .prefix("quire-bench-vault-")
        .tempdir()?;
    copy_vault(vault, copy.path())
        .with_context(|| format!("copying {} for --signed-in", vault.display()))?;
    let password = super::signin::prepare_copy(copy.path())?;
    let mut server = quire(Some(copy.path()), None, config, cpus, tls)?;
    server.vault_copy = Some(copy);
    Ok((server, password))
}

/// Copies a vault's files, but not its databases (`*.db`, `*.db-wal`, `*.db-shm`).
fn copy_vault(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n.ends_with(".db") || n.contains(".db-") {
            continue;
        }
        let dst = to.join(&name);
        if e.file_type()?.is_dir() {
            copy_vault(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), dst)?;
        }
    }
    Ok(())
}

/// Whether this process runs as root (nginx then needs `user root;` to write its
/// cache in a scratch directory).
fn root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// nginx's TLS listener: the certificate files, and how this nginx turns HTTP/2 on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NginxTls<'a> {
    /// Leaf then chain, PEM.
    pub cert: &'a Path,
    /// PKCS#8 key, PEM.
    pub key: &'a Path,
    /// nginx 1.25.1 and later say `http2 on;`; earlier ones (Debian 12 has 1.22)
    /// take `http2` on the `listen` line.
    pub http2_directive: bool,
}

/// The `listen` line (and the TLS settings, with `tls`) of nginx's server block: TLS
/// 1.3 with the clients' one suite and group (see `tls`), a shared session cache as
/// a site would run, HTTP/2 on (the client picks by ALPN, as with quire).
fn nginx_listener(listen: &str, tls: Option<&NginxTls>) -> String {
    let Some(t) = tls else {
        return format!("listen {listen} backlog=4096;");
    };
    let (listen_h2, http2_on) = if t.http2_directive {
        ("", "\n        http2 on;")
    } else {
        (" http2", "")
    };
    format!(
        "listen {listen} ssl{listen_h2} backlog=4096;{http2_on}
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites {cipher};
        ssl_ecdh_curve {group};
        ssl_session_cache shared:SSL:10m;",
        cert = t.cert.display(),
        key = t.key.display(),
        cipher = super::tls::CIPHER,
        group = super::tls::GROUP,
    )
}

/// Whether the installed nginx takes `http2 on;` (1.25.1 and later), from
/// `nginx -v`'s line (`nginx version: nginx/1.22.1`).
fn nginx_has_http2_directive(version_line: &str) -> bool {
    let v: Vec<u32> = version_line
        .rsplit('/')
        .next()
        .unwrap_or("")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .take(3)
        .collect();
    v.as_slice() >= [1, 25, 1].as_slice()
}

/// The nginx configuration: `proxy_cache` in front of `origin` (`host:port`), one
/// worker on `cpu` (the first of the server CPUs), over TLS with `tls`.
pub(crate) fn nginx_conf(
    dir: &Path,
    listen: &str,
    origin: &str,
    cpu: usize,
    tls: Option<&NginxTls>,
) -> String {
    let d = dir.display();
    let user = if root() { "user root;\n" } else { "" };
    let affinity = format!("1{}", "0".repeat(cpu));
    let listener = nginx_listener(listen, tls);
    format!(
        r#"# Rendered by quire bench http: nginx proxy_cache, equivalent to quire's cache.
{user}worker_processes 1;
worker_cpu_affinity {affinity};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy_temp;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    proxy_cache_path {d}/cache levels=1:2 keys_zone=pages:32m max_size=1g inactive=2h use_temp_path=off;
    upstream origin {{ server {origin}; keepalive 16; }}
    server {{
        {listener}
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header Accept-Encoding gzip;
            gunzip on;
            proxy_cache pages;
            proxy_cache_key $scheme$host$request_uri;
            proxy_cache_valid 200 1h;
            proxy_cache_lock on;
            proxy_cache_use_stale updating error timeout;
            proxy_ignore_headers Cache-Control Expires Set-Cookie;
            proxy_hide_header Set-Cookie;
            proxy_hide_header Cache-Status;
            add_header X-Cache $upstream_cache_status;
        }}
    }}
}}
"#
    )
}

/// Starts nginx `proxy_cache` in front of `origin` (`host:port`), pinned to `cpus`,
/// serving HTTPS with `tls`'s certificate when given.
pub(crate) fn nginx(origin: &str, cpus: &str, tls: Option<&TestPki>) -> anyhow::Result<Server> {
    let dir = scratch()?;
    let listen = format!("127.0.0.1:{}", free_port()?);
    let cpu = first_cpu(cpus);
    let conf = dir.path().join("nginx.conf");
    let ssl = tls.map(|t| NginxTls {
        cert: &t.cert,
        key: &t.key,
        http2_directive: Command::new("nginx")
            .arg("-v")
            .output()
            .is_ok_and(|o| nginx_has_http2_directive(&String::from_utf8_lossy(&o.stderr))),
    });
    std::fs::write(
        &conf,
        nginx_conf(dir.path(), &listen, origin, cpu, ssl.as_ref()),
    )?;
    let prefix: PathBuf = dir.path().into();
    let argv = [
        "nginx".as_ref(),
        "-p".as_ref(),
        prefix.as_os_str(),
        "-c".as_ref(),
        conf.as_os_str(),
    ];
    let client = client(tls);
    spawn(
        Kind::Nginx,
        &argv,
        cpus,
        dir,
        (listen, Probe::Get("/robots.txt", &client)),
    )
    .context("nginx (apt-get install nginx)")
}

/// The Varnish VCL: cache a 200 for an hour in front of `origin` (`host:port`).
pub(crate) fn varnish_vcl(origin: &str) -> String {
    let (host, port) = origin.rsplit_once(':').unwrap_or((origin, "80"));
    format!(
        r#"vcl 4.1;
# Rendered by quire bench http: Varnish, equivalent to quire's cache.
backend origin {{ .host = "{host}"; .port = "{port}"; }}
sub vcl_recv {{
    unset req.http.Cookie;
    if (req.method != "GET" && req.method != "HEAD") {{ return (pass); }}
    return (hash);
}}
sub vcl_backend_response {{
    unset beresp.http.Set-Cookie;
    if (beresp.status == 200) {{
        set beresp.ttl = 1h;
        set beresp.grace = 10s;
        # Skip the built-in rule that will not cache `Cache-Control: no-cache`.
        return (deliver);
    }}
}}
sub vcl_deliver {{
    unset resp.http.Cache-Status;
    if (obj.hits > 0) {{ set resp.http.X-Cache = "HIT"; }} else {{ set resp.http.X-Cache = "MISS"; }}
}}
"#
    )
}

/// Starts Varnish in front of `origin` (`host:port`), pinned to `cpus`.
pub(crate) fn varnish(origin: &str, cpus: &str) -> anyhow::Result<Server> {
    let dir = scratch()?;
    let listen = format!("127.0.0.1:{}", free_port()?);
    let vcl = dir.path().join("bench.vcl");
    std::fs::write(&vcl, varnish_vcl(origin))?;
    let work: PathBuf = dir.path().join("varnish");
    let argv = [
        "varnishd".as_ref(),
        "-F".as_ref(),
        "-n".as_ref(),
        work.as_os_str(),
        "-a".as_ref(),
        listen.as_ref(),
        "-T".as_ref(),
        "127.0.0.1:0".as_ref(),
        "-f".as_ref(),
        vcl.as_os_str(),
        "-s".as_ref(),
        "malloc,512m".as_ref(),
    ];
    spawn(
        Kind::Varnish,
        &argv,
        cpus,
        dir,
        (
            listen.clone(),
            Probe::Get("/robots.txt", &urls::Client::Plain),
        ),
    )
    .context("varnish (apt-get install varnish)")
}

/// How a floor is run: `quire bench floor` as it is, on tokio, or over `distinct`
/// responses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FloorKind {
    Epoll,
    Tokio,
    Distinct(usize),
}

/// Starts the machine's floor (`quire bench floor`, this binary, as `how` says)
/// answering every request with `bytes` bytes, pinned to `cpus`.
pub(crate) fn floor(bytes: usize, cpus: &str, how: FloorKind) -> anyhow::Result<Server> {
    let dir = scratch()?;
    let listen = format!("127.0.0.1:{}", free_port()?);
    let exe = std::env::current_exe().context("finding the quire binary")?;
    let bytes = bytes.to_string();
    let mut argv = vec![
        exe.as_os_str(),
        "bench".as_ref(),
        "floor".as_ref(),
        "--listen".as_ref(),
        listen.as_ref(),
        "--bytes".as_ref(),
        bytes.as_ref(),
    ];
    let distinct;
    let kind = match how {
        FloorKind::Epoll => Kind::Floor,
        FloorKind::Tokio => {
            argv.push("--tokio".as_ref());
            Kind::FloorTokio
        }
        FloorKind::Distinct(n) => {
            distinct = n.max(1).to_string();
            argv.push("--distinct".as_ref());
            argv.push(distinct.as_ref());
            Kind::FloorCorpus
        }
    };
    spawn(kind, &argv, cpus, dir, (listen.clone(), Probe::Connect))
}

/// The first CPU of a taskset list (`"0"`, `"0-1"`, `"2,3"`).
pub(crate) fn first_cpu(cpus: &str) -> usize {
    cpus.split([',', '-'])
        .next()
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0)
}

/// How many CPUs a taskset list names (`"1"`: 1, `"0-3"`: 4, `"2,4-5"`: 3); at
/// least 1.
pub(crate) fn cpu_count(cpus: &str) -> usize {
    cpus.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum::<usize>()
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_configurations_name_the_origin_and_the_cpu() {
        let conf = nginx_conf(
            Path::new("/tmp/x"),
            "127.0.0.1:81",
            "127.0.0.1:9000",
            2,
            None,
        );
        assert!(conf.contains("server 127.0.0.1:9000;"));
        assert!(conf.contains("listen 127.0.0.1:81 "));
        assert!(conf.contains("worker_cpu_affinity 100;"));
        assert!(conf.contains("proxy_cache_path /tmp/x/cache "));
        assert!(conf.contains("proxy_ignore_headers Cache-Control"));
        assert!(!conf.contains("ssl"), "cleartext stays cleartext");
        let vcl = varnish_vcl("127.0.0.1:9000");
        assert!(vcl.contains(r#".host = "127.0.0.1"; .port = "9000";"#));
        assert_eq!(first_cpu("3"), 3);
        assert_eq!(first_cpu("0-1"), 0);
        assert_eq!(first_cpu("2,3"), 2);
        assert_eq!(first_cpu(""), 0);
        assert_eq!(cpu_count("1"), 1);
        assert_eq!(cpu_count("0-3"), 4);
        assert_eq!(cpu_count("2,4-5"), 3);
        assert_eq!(cpu_count(""), 1);
    }

    #[test]
    fn nginx_over_tls_gets_the_same_certificate_suite_and_session_cache() {
        let (cert, key) = (Path::new("/s/cert.pem"), Path::new("/s/key.pem"));
        let tls = |http2_directive| NginxTls {
            cert,
            key,
            http2_directive,
        };
        let old = nginx_conf(
            Path::new("/s"),
            "127.0.0.1:8443",
            "o:1",
            0,
            Some(&tls(false)),
        );
        assert!(old.contains("listen 127.0.0.1:8443 ssl http2 backlog=4096;"));
        assert!(!old.contains("http2 on;"));
        let new = nginx_conf(
            Path::new("/s"),
            "127.0.0.1:8443",
            "o:1",
            0,
            Some(&tls(true)),
        );
        assert!(new.contains("listen 127.0.0.1:8443 ssl backlog=4096;\n        http2 on;"));
        for conf in [&old, &new] {
            assert!(conf.contains("ssl_certificate /s/cert.pem;"));
            assert!(conf.contains("ssl_certificate_key /s/key.pem;"));
            assert!(conf.contains("ssl_protocols TLSv1.3;"));
            assert!(conf.contains("ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"));
            assert!(conf.contains("ssl_ecdh_curve X25519;"));
            assert!(conf.contains("ssl_session_cache shared:SSL:10m;"));
            assert!(conf.contains("keepalive_requests 1000000;"), "HTTP/2 too");
        }
        assert!(!nginx_has_http2_directive("nginx version: nginx/1.22.1"));
        assert!(nginx_has_http2_directive("nginx version: nginx/1.25.1"));
        assert!(nginx_has_http2_directive("nginx version: nginx/1.26.0\n"));
        assert!(!nginx_has_http2_directive("nginx version: nginx/1.25.0"));
        assert!(!nginx_has_http2_directive("garbage"));
    }
}
