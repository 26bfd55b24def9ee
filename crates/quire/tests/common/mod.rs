//! A real `quire` process for the binary's end-to-end tests: its standard error
//! collected line by line, the address it says it serves on, killed on drop.

#![allow(dead_code, reason = "each test file uses part of the harness")]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub(crate) const QUIRE: &str = env!("CARGO_BIN_EXE_quire");

/// A running `quire` with its stderr collected.
pub(crate) struct Process {
    pub(crate) child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// Where it serves (from its `serving ... on http://ADDR` line).
    pub(crate) addr: SocketAddr,
}

impl Process {
    /// Starts `cmd` (stderr collected, no admin token from the environment) and
    /// waits for its `serving` line (`quire serve`) or `proxying` line (`quire proxy`).
    pub(crate) fn start(cmd: &mut Command) -> Process {
        let mut child = cmd
            .env_remove("QUIRE_ADMIN_TOKEN")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("quire starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        let mut p = Process {
            child,
            lines,
            addr: "127.0.0.1:1".parse().unwrap(),
        };
        let line = p.wait_line_of(&["serving", "proxying"]);
        // `serving ... on http://ADDR`, `serving ... on https://ADDR`, or
        // `proxying http://ADDR -> ORIGIN`
        let addr = match line.split_once("proxying http://") {
            Some((_, rest)) => rest,
            None => line.rsplit("://").next().unwrap(),
        };
        let addr = addr.split(' ').next().unwrap();
        p.addr = addr
            .parse()
            .unwrap_or_else(|_| panic!("an address in {line}"));
        p
    }

    /// Every stderr line so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The first stderr line containing `what` (waiting up to 90 s for it: a debug build on a loaded machine).
    pub(crate) fn wait_line(&self, what: &str) -> String {
        self.wait_line_of(&[what])
    }

    /// The first stderr line containing one of `any` (waiting up to 90 s).
    pub(crate) fn wait_line_of(&self, any: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            let lines = self.lines.lock().unwrap();
            if let Some(l) = lines.iter().find(|l| any.iter().any(|w| l.contains(w))) {
                return l.clone();
            }
            drop(lines);
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("none of {any:?} in {:#?}", self.lines.lock().unwrap());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `cond` holds within 20 s (checked every 10 ms).
pub(crate) fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Copies the folder `from` to `to`, recursively (a test's own copy of a vault).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// A copy of the bundled example vault in `dir`, for a test to serve (and change).
pub(crate) fn example_vault(dir: &Path) -> std::path::PathBuf {
    let vault = dir.join("vault");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault"),
        &vault,
    );
    vault
}
