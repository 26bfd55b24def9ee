//! The operator's signals on a real `quire serve` process: `SIGHUP` re-reads the
//! configuration (and keeps the old one when the new one is invalid), `SIGUSR1`
//! reopens the access log after a rotation, `SIGTERM` drains and exits; and
//! `quire config check` on good and bad files.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{eventually as wait_until, Process, QUIRE};

const TOKEN_A: &str = "first-admin-token-0123456789";
const TOKEN_B: &str = "second-admin-token-0123456789";

/// A running `quire serve`.
struct Server(Process);

impl std::ops::Deref for Server {
    type Target = Process;
    fn deref(&self) -> &Process {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Process {
        &mut self.0
    }
}

impl Server {
    fn start(vault: &Path, config: &Path) -> Server {
        Server(Process::start(
            Command::new(QUIRE)
                .arg("serve")
                .arg(vault)
                .args(["--listen", "127.0.0.1:0", "--no-watch", "--workers", "1"])
                .arg("--config")
                .arg(config),
        ))
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Status of `GET path` (connection closed after it).
    fn get(&self, path: &str, token: Option<&str>) -> u16 {
        let mut s = TcpStream::connect(self.addr).unwrap();
        let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
        write!(
            s,
            "GET {path} HTTP/1.1\r\nhost: localhost\r\n{auth}connection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }
}

fn write_config(path: &Path, dir: &Path, token: &str) {
    let text = format!(
        "admin_token = \"{token}\"\n\
         [cache]\npath = \"{cache}\"\nsize = \"16MiB\"\n\
         [log]\naccess = \"{log}\"\n",
        cache = dir.join("c.vol").display(),
        log = dir.join("access.log").display(),
    );
    std::fs::write(path, text).unwrap();
}

fn vault_copy(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault");
    let dst = dir.join("vault");
    let ok = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(ok.success());
    dst
}

fn lines_of(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[test]
fn sighup_reloads_sigusr1_reopens_the_log_sigterm_drains() {
    let dir = tempfile::tempdir().unwrap();
    let vault = vault_copy(dir.path());
    let config = dir.path().join("quire.toml");
    write_config(&config, dir.path(), TOKEN_A);
    let mut server = Server::start(&vault, &config);
    assert_eq!(server.get("/", None), 200);
    assert_eq!(server.get("/_quire/metrics", Some(TOKEN_A)), 200);

    // SIGHUP: the new token applies, the old one is refused.
    write_config(&config, dir.path(), TOKEN_B);
    server.signal("-HUP");
    server.wait_line("configuration reloaded");
    assert_eq!(server.get("/_quire/metrics", Some(TOKEN_B)), 200);
    assert_eq!(server.get("/_quire/metrics", Some(TOKEN_A)), 401);

    // An invalid file: said in the log, the running configuration stays.
    std::fs::write(&config, "admin_token = \"x\"\nno_such_key = 1\n").unwrap();
    server.signal("-HUP");
    let line = server.wait_line("not reloaded");
    assert!(line.contains("no_such_key"), "{line}");
    assert_eq!(server.get("/_quire/metrics", Some(TOKEN_B)), 200);

    // SIGUSR1 after a rotation: new lines go to a new file at the path.
    let log = dir.path().join("access.log");
    assert!(wait_until(|| lines_of(&log) >= 5), "lines written");
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    let before = lines_of(&rotated);
    server.signal("-USR1");
    assert!(wait_until(|| log.exists()), "reopened");
    assert_eq!(server.get("/", None), 200);
    assert!(
        wait_until(|| lines_of(&log) == 1),
        "the next line in the new file"
    );
    assert_eq!(lines_of(&rotated), before);

    // SIGTERM: drains and exits cleanly.
    server.signal("-TERM");
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status}");
    server.wait_line("stopped");
}

/// `quire config check --config path`, run to its end.
fn config_check(path: &Path) -> std::process::Output {
    Command::new(QUIRE)
        .args(["config", "check", "--config"])
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn config_check_prints_the_effective_config_or_names_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    write_config(&good, dir.path(), TOKEN_A);
    let out = config_check(&good);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains(TOKEN_A),
        "the token is never printed:\n{text}"
    );
    assert!(text.contains("# admin_token is set"), "{text}");
    // Every default is filled in, and the output reads back as a configuration.
    assert!(
        text.contains("[limits]") && text.contains("shutdown_grace = 30"),
        "{text}"
    );
    assert!(
        text.contains("access = ") && text.contains("format = \"combined\""),
        "{text}"
    );
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &text).unwrap();
    let out = config_check(&again);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for (text, says) in [
        ("[limits]\nconections = 5\n", "conections"),
        ("[cache]\nsize = \"12 parsecs\"\n", "parsecs"),
        ("[log]\nformat = \"xml\"\n", "xml"),
        (
            "[tls]\ncert = \"/nonexistent/cert.pem\"\nkey = \"/nonexistent/key.pem\"\n",
            "/nonexistent/cert.pem",
        ),
    ] {
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, text).unwrap();
        let out = config_check(&bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text} was accepted");
        assert!(
            err.contains(says) && err.contains("bad.toml"),
            "{text}: {err}"
        );
    }
}
