//! `quire serve` started as a newcomer starts it, its log read as a file or a pipe
//! reads it: the default start is clean, and the log carries no colour codes.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{example_vault, Process, QUIRE};

/// `quire [global] serve` on a copy of the example vault in `dir`, with no
/// configuration file and `RUST_LOG=info`, its log a pipe.
fn serve_logging_info(dir: &Path, global: &[&str]) -> Process {
    let mut cmd = Command::new(QUIRE);
    cmd.args(global)
        .arg("serve")
        .arg(example_vault(dir))
        .args(["--listen", "127.0.0.1:0", "--no-watch", "--cache"])
        .arg(dir.join("serve.vol"))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    Process::start(&mut cmd)
}

/// The example vault with no configuration file and the default cache size: it
/// used to warn about its own defaults (`responses larger than 2031552 bytes will
/// not be stored`), with `ESC[33m` colour codes in a log that was a pipe.
#[test]
fn the_default_start_warns_about_nothing_and_logs_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let quire = serve_logging_info(dir.path(), &[]);
    // An info line of the site's own, written before `serving`.
    let info = quire.wait_line("search index rebuilt");
    assert!(info.contains("INFO"), "{info}");
    let lines = quire.lines();
    assert!(
        lines.iter().all(|l| !l.contains('\u{1b}')),
        "colour codes in a piped log: {lines:#?}"
    );
    assert!(
        lines.iter().all(|l| !l.contains("WARN")),
        "the default start warned: {lines:#?}"
    );
}

/// `--log-format json`: every event is one JSON object a line, with its level,
/// target and message, for a log shipper to read without a pattern.
#[test]
fn log_format_json_writes_one_object_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let quire = serve_logging_info(dir.path(), &["--log-format", "json"]);
    let line = quire.wait_line("search index rebuilt");
    let event: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("not one JSON object: {line:?}: {e}"));
    assert_eq!(event["level"], "INFO", "{line}");
    assert!(
        event["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("quire")),
        "{line}"
    );
    assert!(event["fields"]["message"].as_str().is_some(), "{line}");
    // Every event line is an object: the human lines quire prints itself (`quire:
    // serving …`) are not events and stay text.
    for l in quire.lines().iter().filter(|l| !l.starts_with("quire: ")) {
        assert!(
            serde_json::from_str::<serde_json::Value>(l).is_ok(),
            "not JSON: {l:?}"
        );
    }
}

/// `quire health`, the container image's health check: 0 against a running quire,
/// 1 with the reason against a port nothing answers on, and a clear refusal of an
/// https URL.
#[test]
fn quire_health_says_whether_a_quire_answers() {
    let dir = tempfile::tempdir().unwrap();
    let quire = serve_logging_info(dir.path(), &[]);
    let health = |server: &str| {
        Command::new(QUIRE)
            .args(["health", "--server", server])
            .output()
            .unwrap()
    };
    let up = health(&format!("http://{}", quire.addr));
    assert!(up.status.success(), "{up:?}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let down = health(&format!("http://127.0.0.1:{port}"));
    assert_eq!(down.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&down.stderr).contains("connecting"),
        "{down:?}"
    );
    let https = health("https://127.0.0.1:1");
    assert!(String::from_utf8_lossy(&https.stderr).contains("must be http://"));
    let forever = Command::new(QUIRE)
        .args(["health", "--timeout", "0", "--server"])
        .arg(format!("http://{}", quire.addr))
        .output()
        .unwrap();
    assert!(!forever.status.success());
    assert!(String::from_utf8_lossy(&forever.stderr).contains("--timeout must be above 0"));
}
