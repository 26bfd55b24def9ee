//! `quire top` against a real `quire serve`: `--once` prints a frame of what the
//! server did in the interval, and the live view draws in a pseudo-terminal (the
//! `script` utility gives it one) and quits on `q`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{example_vault, Process, QUIRE};

const TOKEN: &str = "top-test-admin-token-0123";

fn serve(dir: &Path) -> Process {
    let config = dir.join("quire.toml");
    std::fs::write(&config, format!("admin_token = \"{TOKEN}\"\n")).unwrap();
    let mut cmd = Command::new(QUIRE);
    cmd.arg("serve")
        .arg(example_vault(dir))
        .args(["--listen", "127.0.0.1:0", "--no-watch", "--cache"])
        .arg(dir.join("serve.vol"))
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null());
    Process::start(&mut cmd)
}

/// Asks for `path` on a keep-alive-less connection; the status line.
fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or("").to_owned()
}

/// Requests the home page and a missing page until `stop`.
fn load(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut k = 0;
        while !stop.load(Ordering::Relaxed) {
            get(addr, "/");
            get(addr, &format!("/no-such-page-{k}"));
            k += 1;
        }
    })
}

#[test]
fn top_once_prints_what_the_server_did_in_the_interval() {
    let dir = tempfile::tempdir().unwrap();
    let q = serve(dir.path());
    assert!(get(q.addr, "/").contains("200"));
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(q.addr, stop.clone());
    let out = Command::new(QUIRE)
        .args(["top", "--once", "--interval", "1", "--server"])
        .arg(format!("http://{}", q.addr))
        .env("QUIRE_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    loader.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with(&format!("quire top: http://{}", q.addr)),
        "{text}"
    );
    let rps: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("requests")?
                .trim()
                .split("/s")
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("a request rate in {text}"));
    assert!(rps > 0.0, "{text}");
    assert!(text.contains("hits    p50"), "hits were timed: {text}");
    assert!(text.contains("hottest (estimated, lately)"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().split("  ").nth(1) == Some("/")),
        "the home page among the hottest: {text}"
    );
    println!("{text}");
    // A wrong token is refused with a clear error.
    let bad = Command::new(QUIRE)
        .args(["top", "--once", "--server"])
        .arg(format!("http://{}", q.addr))
        .env("QUIRE_ADMIN_TOKEN", "not-the-token-at-all-0")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("token was refused"));
}

#[test]
fn top_draws_in_a_terminal_and_quits_on_q() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` (util-linux) to make a pseudo-terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let q = serve(dir.path());
    // The pseudo-terminal starts with no size: give it one, as a terminal has.
    let cmd = format!(
        "stty cols 100 rows 30; exec {QUIRE} top --interval 0.3 --server http://{} --token {TOKEN}",
        q.addr
    );
    let mut child = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child.stdin.as_mut().unwrap().write_all(b"q").unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "quire top did not quit on q");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut screen = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut screen)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{screen}");
    // ratatui moves the cursor over blanks: look for words, not phrases.
    for word in ["quire", "quits", "requests", "ratio", "misses", "store"] {
        assert!(screen.contains(word), "{word} in {screen}");
    }
}
