//! Operations, with real processes: the built `quire` binary started as an operator
//! (or systemd) would, signalled, and loaded over real sockets.
//!
//! - a binary upgrade (`SIGUSR2`) under load, three times (and twice for `quire
//!   serve`): no request fails; ten reloads (`SIGHUP`) under load: none fails;
//! - systemd notifications: `READY=1`, `RELOADING=1` on SIGHUP, `WATCHDOG=1`,
//!   `STOPPING=1` on SIGTERM;
//! - socket activation: quire serves the socket it is handed as descriptor 3;
//! - the example units in `contrib/` pass `systemd-analyze verify`.
//!
//! No test sleeps for a fixed time where it can poll: every wait is for a log line,
//! a notification or a count, with a deadline.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quire_testkit::{Origin, Route};

const QUIRE: &str = env!("CARGO_BIN_EXE_quire");

/// Every wait's limit: far above what each step takes.
const DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Processes

/// The quire processes one test started: the first is a child of the test, those
/// an upgrade started are not. Every one still alive is killed on drop.
struct Quire {
    first: Child,
    pids: Vec<u32>,
    lines: Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Quire {
    /// Starts `cmd` (quire, or a wrapper that execs it), its stderr read line by
    /// line; `dir` is its scratch folder.
    fn start(cmd: &mut Command, dir: tempfile::TempDir) -> Quire {
        let mut first = cmd.stderr(Stdio::piped()).spawn().expect("quire starts");
        let stderr = first.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                eprintln!("  | {line}");
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let pid = first.id();
        Quire {
            first,
            pids: vec![pid],
            lines,
            _dir: dir,
        }
    }

    /// The pid serving now.
    fn pid(&self) -> u32 {
        *self.pids.last().expect("a pid")
    }

    /// The first stderr line `pick` accepts, and what it made of it.
    fn wait_line<T>(&self, what: &str, mut pick: impl FnMut(&str) -> Option<T>) -> T {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(t) = pick(&line) {
                        return t;
                    }
                }
                Err(e) => panic!("no log line {what} ({e})"),
            }
        }
    }

    /// The address quire says it listens on.
    fn addr(&self) -> SocketAddr {
        self.wait_line("saying where quire listens", |l| {
            let rest = match l.strip_prefix("quire: proxying http://") {
                Some(rest) => rest,
                None => {
                    l.strip_prefix("quire: serving ")?
                        .split_once(" on http://")?
                        .1
                }
            };
            rest.split(' ').next()?.parse().ok()
        })
    }

    fn signal(&self, pid: u32, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
        rustix::process::kill_process(pid, sig).expect("signal sent");
    }

    /// Sends SIGUSR2 and waits until a new process accepts and the old one is gone.
    fn upgrade(&mut self) -> u32 {
        let old = self.pid();
        self.signal(old, rustix::process::Signal::USR2);
        let new = self.wait_line("of a new process taking over", |l| {
            let pid = l.strip_prefix("quire: upgrade: pid ")?;
            let pid = pid.strip_suffix(" took over and accepts")?;
            pid.parse::<u32>().ok()
        });
        self.pids.push(new);
        assert_ne!(new, old);
        self.wait_gone(old);
        new
    }

    /// Waits until `pid` has exited (reaped, or a zombie nobody reaps).
    fn wait_gone(&mut self, pid: u32) {
        let end = Instant::now() + DEADLINE;
        while Instant::now() < end {
            if pid == self.first.id() {
                if self.first.try_wait().expect("wait").is_some() {
                    return;
                }
            } else if !alive(pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("pid {pid} did not exit");
    }
}

impl Drop for Quire {
    fn drop(&mut self) {
        for &pid in &self.pids {
            if alive(pid) {
                if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
        }
        let _ = self.first.wait();
    }
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// A scratch folder with a config file: a short drain, a small cache.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("quire.toml");
    std::fs::write(&config, "[limits]\nshutdown_grace = \"5s\"\n").expect("config");
    (dir, config)
}

/// `quire proxy` in front of `origin` with its cache in `dir`.
fn proxy_command(program: &str, origin: &str, dir: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(["proxy", "--origin", origin, "--listen", "127.0.0.1:0"])
        .arg("--config")
        .arg(config)
        .arg("--cache")
        .arg(dir.join("proxy.vol"))
        .args(["--cache-size", "16MiB", "--workers", "2"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    cmd
}

/// An origin on its own runtime, with `routes`.
fn origin(routes: &[(String, Route)]) -> (tokio::runtime::Runtime, Origin) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let origin = rt.block_on(Origin::start());
    for (path, r) in routes {
        origin.route(path, r.clone());
    }
    (rt, origin)
}

// ---------------------------------------------------------------------------
// A keep-alive HTTP/1.1 client that counts failures

/// What the load saw.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    /// Requests sent again because a reused connection closed before any byte of
    /// the response (what HTTP clients do for idempotent requests).
    retried: AtomicU64,
    /// The slowest success, start to end (retries included), in microseconds.
    slowest_us: AtomicU64,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }
}

/// How one exchange ended.
enum Outcome {
    Ok {
        close: bool,
        body: Vec<u8>,
    },
    /// The connection closed before any byte of the response.
    ClosedEarly(std::io::Error),
    Failed(String),
}

/// Sends `GET path` on `s` and reads the response, which must be a 200.
fn exchange(s: &mut TcpStream, path: &str) -> Outcome {
    let req = format!("GET {path} HTTP/1.1\r\nHost: load.test\r\n\r\n");
    if let Err(e) = s.write_all(req.as_bytes()) {
        return Outcome::ClosedEarly(e);
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut chunk) {
            Ok(0) if buf.is_empty() => {
                return Outcome::ClosedEarly(ErrorKind::UnexpectedEof.into())
            }
            Err(e) if buf.is_empty() && e.kind() != ErrorKind::WouldBlock => {
                return Outcome::ClosedEarly(e)
            }
            Ok(0) => return Outcome::Failed("closed in the response head".into()),
            Err(e) => return Outcome::Failed(format!("reading the head: {e}")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if !head.starts_with("http/1.1 200 ") {
        let line = head.lines().next().unwrap_or_default().to_string();
        return Outcome::Failed(format!("{path}: {line}"));
    }
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let close = field("connection:").is_some_and(|v| v == "close");
    let mut rest = buf[head_end..].to_vec();
    let body = if field("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        match read_chunked(s, &mut rest) {
            Ok(b) => b,
            Err(e) => return Outcome::Failed(format!("{path}: chunked body: {e}")),
        }
    } else {
        let len: usize = field("content-length:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while rest.len() < len {
            match s.read(&mut chunk) {
                Ok(0) => return Outcome::Failed(format!("{path}: body cut short")),
                Err(e) => return Outcome::Failed(format!("{path}: reading the body: {e}")),
                Ok(n) => rest.extend_from_slice(&chunk[..n]),
            }
        }
        rest
    };
    Outcome::Ok { close, body }
}

/// The body of `GET path` on a new connection.
fn get(addr: SocketAddr, path: &str) -> Vec<u8> {
    let mut s = connect(addr).expect("connect");
    match exchange(&mut s, path) {
        Outcome::Ok { body, .. } => body,
        Outcome::ClosedEarly(e) => panic!("GET {path}: closed: {e}"),
        Outcome::Failed(what) => panic!("GET {what}"),
    }
}

/// A chunked body, `have` holding what was read past the head.
fn read_chunked(s: &mut TcpStream, have: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let mut fill = |have: &mut Vec<u8>| -> std::io::Result<()> {
        match s.read(&mut chunk)? {
            0 => Err(ErrorKind::UnexpectedEof.into()),
            n => {
                have.extend_from_slice(&chunk[..n]);
                Ok(())
            }
        }
    };
    loop {
        let Some(eol) = have.windows(2).position(|w| w == b"\r\n") else {
            fill(have)?;
            continue;
        };
        let size_text = String::from_utf8_lossy(&have[..eol]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| std::io::Error::other(format!("chunk size {size_text:?}")))?;
        while have.len() < eol + 2 + size + 2 {
            fill(have)?;
        }
        body.extend_from_slice(&have[eol + 2..eol + 2 + size]);
        have.drain(..eol + 2 + size + 2);
        if size == 0 {
            return Ok(body);
        }
    }
}

/// Issues GETs over keep-alive connections until `stop`, counting into `tally`.
fn load(
    addr: SocketAddr,
    paths: &[(String, Vec<u8>)],
    stop: &AtomicBool,
    tally: &Tally,
    seed: usize,
) {
    let mut conn: Option<TcpStream> = None;
    let mut i = seed;
    while !stop.load(Ordering::Relaxed) {
        let (path, want) = &paths[i % paths.len()];
        i += 1;
        let t0 = Instant::now();
        loop {
            let (mut s, reused) = match conn.take() {
                Some(s) => (s, true),
                None => match connect(addr) {
                    Ok(s) => (s, false),
                    Err(e) => {
                        tally.fail(format!("connect: {e}"));
                        break;
                    }
                },
            };
            match exchange(&mut s, path) {
                Outcome::Ok { body, .. } if body != *want => {
                    tally.fail(format!("{path}: wrong body ({} bytes)", body.len()));
                }
                Outcome::Ok { close, .. } => {
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                    let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
                    tally.slowest_us.fetch_max(us, Ordering::Relaxed);
                    if !close {
                        conn = Some(s);
                    }
                }
                Outcome::ClosedEarly(_) if reused => {
                    tally.retried.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Outcome::ClosedEarly(e) => {
                    tally.fail(format!("{path}: new connection closed: {e}"))
                }
                Outcome::Failed(what) => tally.fail(what),
            }
            break;
        }
    }
}

fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_write_timeout(Some(Duration::from_secs(30)))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Waits until `tally` counts `more` successes beyond now.
fn wait_for_progress(tally: &Tally, more: u64) {
    let target = tally.ok.load(Ordering::Relaxed) + more;
    let end = Instant::now() + DEADLINE;
    while tally.ok.load(Ordering::Relaxed) < target {
        assert!(Instant::now() < end, "the load made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Four keep-alive clients load `paths` on `addr` while `step` runs `steps` times
/// (an upgrade, a reload), with a few hundred requests before, between and after.
fn load_across(
    quire: &mut Quire,
    addr: SocketAddr,
    paths: Vec<(String, Vec<u8>)>,
    steps: usize,
    mut step: impl FnMut(&mut Quire),
) -> Arc<Tally> {
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let paths = Arc::new(paths);
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (stop, tally, paths) = (stop.clone(), tally.clone(), paths.clone());
            std::thread::spawn(move || load(addr, &paths, &stop, &tally, c * 7))
        })
        .collect();
    wait_for_progress(&tally, 300);
    for _ in 0..steps {
        step(quire);
        wait_for_progress(&tally, 300);
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("client");
    }
    tally
}

impl Tally {
    /// Says what the load saw, and fails on any failed request.
    fn assert_none_failed(&self, across: &str) {
        let failures = self.failures.lock().unwrap().clone();
        eprintln!(
            "load across {across}: {} ok, {} sent again after a reused connection closed, {} failed, slowest {} ms",
            self.ok.load(Ordering::Relaxed),
            self.retried.load(Ordering::Relaxed),
            failures.len(),
            self.slowest_us.load(Ordering::Relaxed) / 1000,
        );
        assert!(failures.is_empty(), "failed requests: {failures:?}");
    }
}

// ---------------------------------------------------------------------------
// systemd's notification socket

/// A notification socket like systemd's, collecting what arrives.
struct Notify {
    _dir: tempfile::TempDir,
    path: PathBuf,
    socket: UnixDatagram,
    seen: Vec<String>,
}

impl Notify {
    fn bind() -> Notify {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).expect("bind");
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        Notify {
            _dir: dir,
            path,
            socket,
            seen: Vec::new(),
        }
    }

    /// Waits for a message `pick` accepts; every message is kept in `seen`.
    fn wait<T>(&mut self, what: &str, mut pick: impl FnMut(&str) -> Option<T>) -> T {
        let end = Instant::now() + DEADLINE;
        let mut buf = [0u8; 4096];
        while Instant::now() < end {
            let Ok(n) = self.socket.recv(&mut buf) else {
                continue;
            };
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            self.seen.push(msg.clone());
            if let Some(t) = pick(&msg) {
                return t;
            }
        }
        panic!("no notification {what}; got {:?}", self.seen);
    }
}

/// The value of `key` in a notification.
fn field<'a>(msg: &'a str, key: &str) -> Option<&'a str> {
    msg.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

// ---------------------------------------------------------------------------
// The tests

/// Three binary upgrades under load from four keep-alive clients: hits, pass-through
/// misses and slow responses in flight; nothing fails, each upgrade runs a new pid,
/// and systemd would have followed the main pid and heard `READY=1` from each.
#[test]
fn binary_upgrades_under_load_fail_no_request() {
    let mut routes = Vec::new();
    let mut paths = Vec::new();
    for k in 0..20 {
        let body = quire_testkit::page(k);
        let path = format!("/page/{k}");
        routes.push((
            path.clone(),
            Route::ok(body.clone(), &[("cache-control", "max-age=3600")]),
        ));
        paths.push((path, body));
    }
    for k in 0..4 {
        let body = format!("fresh {k}").into_bytes();
        let path = format!("/fresh/{k}");
        routes.push((
            path.clone(),
            Route::ok(body.clone(), &[("cache-control", "no-store")]),
        ));
        paths.push((path, body));
    }
    let slow = b"slow answer".to_vec();
    routes.push((
        "/slow".into(),
        Route::ok(slow.clone(), &[("cache-control", "no-store")]).delay(Duration::from_millis(150)),
    ));
    paths.push(("/slow".into(), slow));
    let (_rt, origin) = origin(&routes);
    let mut notify = Notify::bind();
    let (dir, config) = scratch();
    let mut cmd = proxy_command(QUIRE, &origin.url(), dir.path(), &config);
    cmd.env("NOTIFY_SOCKET", &notify.path);
    let mut quire = Quire::start(&mut cmd, dir);
    let addr = quire.addr();
    let first = quire.pid();
    notify.wait("READY=1", |m| {
        (field(m, "READY") == Some("1")).then_some(())
    });
    let tally = load_across(&mut quire, addr, paths, 3, |quire| {
        let new = quire.upgrade().to_string();
        notify.wait("MAINPID= of the new process", |m| {
            (field(m, "MAINPID") == Some(&new)).then_some(())
        });
        notify.wait("READY=1 from the new process", |m| {
            (field(m, "READY") == Some("1") && field(m, "MAINPID") == Some(&new)).then_some(())
        });
    });
    tally.assert_none_failed("3 upgrades of quire proxy");
    let pids: HashSet<u32> = quire.pids.iter().copied().collect();
    assert_eq!(pids.len(), 4, "four processes served: {:?}", quire.pids);
    assert_ne!(quire.pid(), first);
    assert!(
        notify
            .seen
            .iter()
            .any(|m| field(m, "RELOADING") == Some("1")),
        "an upgrade says RELOADING=1: {:?}",
        notify.seen
    );
    let last = quire.pid();
    quire.signal(last, rustix::process::Signal::TERM);
    quire.wait_gone(last);
}

/// `quire serve` across two upgrades: the vault's databases change hands after
/// the old process has flushed them; nothing fails.
#[test]
fn binary_upgrades_of_quire_serve_fail_no_request() {
    let (dir, config) = scratch();
    let vault = dir.path().join("vault");
    std::fs::create_dir(&vault).expect("vault");
    for (name, text) in [("hello", "Hello, [[world]]."), ("world", "The world.")] {
        let note = format!("---\ntitle: {name}\nfree: true\n---\n{text}\n");
        std::fs::write(vault.join(format!("{name}.md")), note).expect("note");
    }
    let mut cmd = Command::new(QUIRE);
    cmd.arg("serve")
        .arg(&vault)
        .args(["--listen", "127.0.0.1:0", "--workers", "2", "--no-watch"])
        .arg("--config")
        .arg(&config)
        .arg("--cache")
        .arg(dir.path().join("serve.vol"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    let mut quire = Quire::start(&mut cmd, dir);
    let addr = quire.addr();
    let paths: Vec<(String, Vec<u8>)> = ["/", "/hello", "/world"]
        .into_iter()
        .map(|p| (p.to_string(), get(addr, p)))
        .collect();
    let tally = load_across(&mut quire, addr, paths, 2, |quire| {
        quire.upgrade();
    });
    tally.assert_none_failed("2 upgrades of quire serve");
    let last = quire.pid();
    quire.signal(last, rustix::process::Signal::TERM);
    quire.wait_gone(last);
}

/// Ten reloads (SIGHUP, the configuration read again) under load: nothing fails,
/// the process stays, systemd hears `RELOADING=1` and `READY=1` around each.
#[test]
fn reloads_under_load_fail_no_request() {
    let body = quire_testkit::page(1);
    let routes = [
        (
            "/page".to_string(),
            Route::ok(body.clone(), &[("cache-control", "max-age=3600")]),
        ),
        (
            "/fresh".to_string(),
            Route::ok("fresh", &[("cache-control", "no-store")]),
        ),
    ];
    let (_rt, origin) = origin(&routes);
    let mut notify = Notify::bind();
    let (dir, config) = scratch();
    let mut cmd = proxy_command(QUIRE, &origin.url(), dir.path(), &config);
    cmd.env("NOTIFY_SOCKET", &notify.path);
    let mut quire = Quire::start(&mut cmd, dir);
    let addr = quire.addr();
    let pid = quire.pid();
    notify.wait("READY=1", |m| {
        (field(m, "READY") == Some("1")).then_some(())
    });
    let paths = vec![("/page".into(), body), ("/fresh".into(), b"fresh".to_vec())];
    let tally = load_across(&mut quire, addr, paths, 10, |quire| {
        quire.signal(pid, rustix::process::Signal::HUP);
        quire.wait_line("saying the configuration was reloaded", |l| {
            l.starts_with("quire: SIGHUP: configuration reloaded")
                .then_some(())
        });
        notify.wait("RELOADING=1", |m| {
            (field(m, "RELOADING") == Some("1")).then_some(())
        });
        notify.wait("READY=1 after it", |m| {
            (field(m, "READY") == Some("1")).then_some(())
        });
    });
    tally.assert_none_failed("10 reloads");
    assert_eq!(quire.pids, [pid]);
    assert!(
        tally.retried.load(Ordering::Relaxed) == 0,
        "a reload closes no connection"
    );
    quire.signal(pid, rustix::process::Signal::TERM);
    quire.wait_gone(pid);
}

/// An upgrade whose new process cannot start (a configuration made invalid since)
/// leaves the old one serving.
#[test]
fn a_failed_upgrade_leaves_the_old_process_serving() {
    let (_rt, origin) = origin(&[(
        "/a".into(),
        Route::ok("a", &[("cache-control", "max-age=60")]),
    )]);
    let (dir, config) = scratch();
    let mut quire = Quire::start(
        &mut proxy_command(QUIRE, &origin.url(), dir.path(), &config),
        dir,
    );
    let addr = quire.addr();
    std::fs::write(&config, "[limits]\nshutdown_grace = \"soon\"\n").expect("config");
    quire.signal(quire.pid(), rustix::process::Signal::USR2);
    let why = quire.wait_line("saying the upgrade failed", |l| {
        l.strip_prefix("quire: upgrade failed, this process keeps serving: ")
            .map(str::to_string)
    });
    assert!(why.contains("ended before taking over"), "{why}");
    assert_eq!(get(addr, "/a"), b"a");
    assert!(alive(quire.pid()));
    let pid = quire.pid();
    quire.signal(pid, rustix::process::Signal::TERM);
    quire.wait_gone(pid);
    assert!(quire.first.wait().expect("status").success());
}

/// `READY=1` with the pid, `WATCHDOG=1` at half the period, `RELOADING=1` (with
/// `MONOTONIC_USEC`) and `READY=1` around SIGHUP, `STOPPING=1` on SIGTERM.
#[test]
fn systemd_hears_ready_reloading_watchdog_and_stopping() {
    let mut notify = Notify::bind();
    let (dir, config) = scratch();
    // The origin is never asked.
    let mut cmd = proxy_command(QUIRE, "http://127.0.0.1:9", dir.path(), &config);
    cmd.env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "200000");
    let mut quire = Quire::start(&mut cmd, dir);
    let pid = quire.pid();
    let ready = notify.wait("READY=1", |m| {
        (field(m, "READY") == Some("1")).then(|| m.to_string())
    });
    assert_eq!(field(&ready, "MAINPID"), Some(pid.to_string().as_str()));
    for _ in 0..3 {
        notify.wait("WATCHDOG=1", |m| {
            (field(m, "WATCHDOG") == Some("1")).then_some(())
        });
    }
    quire.signal(pid, rustix::process::Signal::HUP);
    let reloading = notify.wait("RELOADING=1", |m| {
        (field(m, "RELOADING") == Some("1")).then(|| m.to_string())
    });
    let usec: u64 = field(&reloading, "MONOTONIC_USEC")
        .and_then(|u| u.parse().ok())
        .expect("MONOTONIC_USEC");
    assert!(usec > 0);
    notify.wait("READY=1 after the reload", |m| {
        (field(m, "READY") == Some("1")).then_some(())
    });
    quire.signal(pid, rustix::process::Signal::TERM);
    notify.wait("STOPPING=1", |m| {
        (field(m, "STOPPING") == Some("1")).then_some(())
    });
    quire.wait_gone(pid);
    assert!(quire.first.wait().expect("status").success());
}

/// A listening socket handed over as descriptor 3 (`LISTEN_FDS=1`, `LISTEN_PID`)
/// is served instead of `--listen`; an upgrade from there hands it on.
#[test]
fn a_socket_from_systemd_is_served_and_handed_on() {
    let (_rt, origin) = origin(&[(
        "/a".into(),
        Route::ok("a", &[("cache-control", "max-age=60")]),
    )]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    // The listener goes to the child as descriptor 3, and LISTEN_PID must be the
    // child's pid, known only in the child: a shell gets the socket as its stdin,
    // moves it to 3, sets both and execs quire (`$0`, with its arguments `$@`).
    let script =
        "exec 3<&0 0</dev/null; LISTEN_FDS=1 LISTEN_FDNAMES=listen LISTEN_PID=$$ exec \"$0\" \"$@\"";
    let (dir, config) = scratch();
    let quire_cmd = proxy_command(QUIRE, &origin.url(), dir.path(), &config);
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(script)
        .arg(QUIRE)
        .args(quire_cmd.get_args())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(
            listener.try_clone().expect("dup"),
        )));
    let mut quire = Quire::start(&mut sh, dir);
    drop(listener);
    quire.wait_line("saying the socket came from systemd", |l| {
        l.contains("handed over by systemd").then_some(())
    });
    assert_eq!(get(addr, "/a"), b"a");
    quire.upgrade();
    assert_eq!(get(addr, "/a"), b"a");
    let pid = quire.pid();
    quire.signal(pid, rustix::process::Signal::TERM);
    quire.wait_gone(pid);
}

/// `contrib/quire.service` and `contrib/quire.socket` pass `systemd-analyze verify`
/// without a warning (`ExecStart=` pointed at the built binary: verify checks it).
#[test]
#[cfg_attr(
    not(has_systemd_analyze),
    ignore = "systemd-analyze not found on PATH: the units in contrib/ are not verified"
)]
fn the_example_units_verify() {
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib");
    let dir = tempfile::tempdir().expect("tempdir");
    for unit in ["quire.service", "quire.socket"] {
        let text = std::fs::read_to_string(contrib.join(unit)).expect("unit");
        let text = text.replace("/usr/local/bin/quire", QUIRE);
        std::fs::write(dir.path().join(unit), text).expect("copy");
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(dir.path().join("quire.service"))
        .arg(dir.path().join("quire.socket"))
        .output()
        .expect("systemd-analyze runs");
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let about_ours: Vec<&str> = said.lines().filter(|l| l.contains("quire.s")).collect();
    assert!(
        out.status.success() && about_ours.is_empty(),
        "systemd-analyze verify: {said}"
    );
}
