//! `quire warm` against a real `quire serve`: every page its sitemap names is stored
//! by one run and a hit for the next, and bad input is an error naming it.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{example_vault, Process, QUIRE};

/// `quire serve` on a copy of the example vault, with no limit on misses a second
/// (warming from one address would otherwise be held to a reader's budget) and
/// `more` in its configuration.
fn serve_with(dir: &Path, more: &str) -> Process {
    let vault = example_vault(dir);
    let config = dir.join("quire.toml");
    std::fs::write(&config, format!("[rate_limit]\nmisses_per_sec = 0\n{more}")).unwrap();
    let mut cmd = Command::new(QUIRE);
    cmd.arg("serve")
        .arg(&vault)
        .args(["--listen", "127.0.0.1:0", "--no-watch", "--config"])
        .arg(&config)
        .arg("--cache")
        .arg(dir.join("serve.vol"))
        .stdin(Stdio::null());
    Process::start(&mut cmd)
}

fn serve(dir: &Path) -> Process {
    serve_with(dir, "")
}

fn warm(args: &[&str]) -> Output {
    Command::new(QUIRE)
        .arg("warm")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("quire warm runs")
}

/// The counts of the summary line: already cached, stored, not stored, failed.
fn counts(out: &Output) -> [u64; 4] {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("warmed "))
        .unwrap_or_else(|| {
            panic!(
                "no summary in {text:?} / {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let numbers: Vec<u64> = line
        .split(": ")
        .nth(1)
        .unwrap()
        .split(", ")
        .map(|part| part.split(' ').next().unwrap().parse().unwrap())
        .collect();
    numbers.try_into().unwrap()
}

#[test]
fn warming_a_sitemap_stores_every_page_and_a_second_run_finds_them_all_cached() {
    let dir = tempfile::tempdir().unwrap();
    let quire = serve(dir.path());
    let server = format!("http://{}", quire.addr);
    let sitemap = format!("{server}/sitemap.xml");
    let args = [
        "--server",
        &server,
        "--sitemap",
        &sitemap,
        "--rate",
        "2000",
        "--concurrency",
        "8",
    ];

    let first = warm(&args);
    assert!(first.status.success(), "{first:?}");
    let [hit, stored, not_stored, failed] = counts(&first);
    assert_eq!((not_stored, failed), (0, 0), "{first:?}");
    // quire serve renders its pages before anyone asks once a first request names
    // its host (the sitemap's, here), so some may be cached by the time warm asks;
    // every one is one or the other.
    assert!(
        hit + stored > 100 && stored > 0,
        "the example vault's public pages were stored: {first:?}"
    );

    let second = warm(&args);
    assert!(second.status.success(), "{second:?}");
    assert_eq!(counts(&second), [hit + stored, 0, 0, 0], "{second:?}");
}

#[test]
fn a_list_with_a_relative_url_is_refused_naming_it_and_a_missing_page_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let quire = serve(dir.path());
    let server = format!("http://{}", quire.addr);
    let list = dir.path().join("urls.txt");

    std::fs::write(&list, format!("# pages\n{server}/\n/not-absolute\n")).unwrap();
    let bad = warm(&["--server", &server, "--urls", list.to_str().unwrap()]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("\"/not-absolute\" is not an absolute http(s) URL"),
        "{err}"
    );

    std::fs::write(
        &list,
        format!("{server}/\n{server}/no-such-note-anywhere\n"),
    )
    .unwrap();
    let missing = warm(&[
        "--server",
        &server,
        "--urls",
        list.to_str().unwrap(),
        "--rate",
        "100",
    ]);
    assert!(
        !missing.status.success(),
        "a 404 fails the run: {missing:?}"
    );
    assert_eq!(counts(&missing)[3], 1, "{missing:?}");
    let out = String::from_utf8_lossy(&missing.stdout);
    assert!(out.contains("no-such-note-anywhere: HTTP 404"), "{out}");
}

/// `quire serve` on a copy of the example vault behind its HTTPS listener, with a
/// self-signed certificate for `site.test`; the certificate's PEM path.
fn serve_https(dir: &Path) -> (Process, std::path::PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["site.test".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_file, key_file) = (dir.join("site.crt"), dir.join("site.key"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let tls = format!("[tls]\ncert = {cert_file:?}\nkey = {key_file:?}\n");
    (serve_with(dir, &tls), cert_file)
}

#[test]
fn warming_an_https_listener_names_the_site_and_checks_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (quire, cert) = serve_https(dir.path());
    let server = format!("https://{}", quire.addr);
    let list = dir.path().join("urls.txt");
    std::fs::write(&list, "https://site.test/\n").unwrap();
    let list = list.to_str().unwrap();
    let ca = cert.to_str().unwrap();

    // The site's certificate, trusted: stored by the first run, a hit for the next.
    let args = ["--server", &server, "--ca-file", ca, "--urls", list];
    let first = warm(&args);
    assert!(first.status.success(), "{first:?}");
    let [hit, stored, _, _] = counts(&first);
    assert_eq!(hit + stored, 1, "{first:?}");
    let second = warm(&args);
    assert_eq!(counts(&second), [1, 0, 0, 0], "{second:?}");

    // Not trusted (the system's roots only): the handshake fails, and says why.
    let untrusted = warm(&["--server", &server, "--urls", list]);
    assert!(!untrusted.status.success());
    assert_eq!(counts(&untrusted)[3], 1, "{untrusted:?}");
    let out = String::from_utf8_lossy(&untrusted.stdout).to_lowercase();
    assert!(out.contains("certificate"), "{out}");

    // A CA file for a plain server is a mistake, named.
    let plain = format!("http://{}", quire.addr);
    let bad = warm(&["--server", &plain, "--ca-file", ca, "--urls", list]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--ca-file is for an https:// server"), "{err}");
}
