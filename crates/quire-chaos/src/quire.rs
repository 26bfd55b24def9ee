//! The quire under test: the real binary as a child process, started, SIGKILLed and
//! restarted on the same volume and address, its health awaited and its memory read
//! from `/proc`.
//!
//! Key decisions:
//! - **A child process, never in-process**: SIGKILL has to take the whole server down
//!   at an arbitrary instruction, with its mapped volume left as the kernel has it.
//! - **Same arguments on every start**, so a restart reopens the same volume file on
//!   the same port; quire's stderr from every start is appended to one log, which the
//!   runner searches for panics at the end.
//! - **Ready means `/_quire/health` answered 200**, polled every 50 ms within a bound;
//!   a child that exits first is a failed start, with the log's tail as the reason.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// The admin token the runner gives quire.
pub(crate) const ADMIN_TOKEN: &str = "quire-chaos-admin-token-0123456789";

/// A quire binary with the arguments of its every start.
#[derive(Debug)]
pub(crate) struct Quire {
    exe: PathBuf,
    args: Vec<OsString>,
    addr: SocketAddr,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
    /// Extra environment of every start (e.g. a preloaded clock that is off).
    envs: Vec<(OsString, OsString)>,
}

impl Quire {
    /// quire at `exe`, run with `args`, listening on `addr`, its stderr appended to
    /// `log`.
    pub(crate) fn new(exe: &Path, args: Vec<OsString>, addr: SocketAddr, log: PathBuf) -> Quire {
        Quire {
            exe: exe.to_path_buf(),
            args,
            addr,
            log,
            child: None,
            starts: 0,
            envs: Vec::new(),
        }
    }

    /// Sets `key` to `value` in the environment of every start.
    pub(crate) fn env(&mut self, key: impl Into<OsString>, value: impl Into<OsString>) {
        self.envs.push((key.into(), value.into()));
    }

    /// The running child's pid.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// Starts quire and waits until it is healthy (at most `within`); the time it took.
    pub(crate) async fn start(&mut self, within: Duration) -> anyhow::Result<Duration> {
        let began = Instant::now();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        self.starts += 1;
        let child = Command::new(&self.exe)
            .args(&self.args)
            .env("QUIRE_ADMIN_TOKEN", ADMIN_TOKEN)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.exe.display()))?;
        self.child = Some(child);
        while began.elapsed() < within {
            if healthy(self.addr).await {
                return Ok(began.elapsed());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                anyhow::bail!(
                    "quire exited ({status}) before answering: {}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("quire did not answer /_quire/health within {within:?}")
    }

    /// SIGKILLs quire and reaps it.
    pub(crate) async fn kill9(&mut self) -> anyhow::Result<()> {
        let mut child = self.child.take().context("quire is not running")?;
        child.start_kill().context("SIGKILL")?;
        child.wait().await.context("reaping quire")?;
        Ok(())
    }

    /// SIGTERMs quire and waits (at most `within`) for it to drain and exit; whether it
    /// exited with success.
    pub(crate) async fn stop(&mut self, within: Duration) -> anyhow::Result<bool> {
        let Some(mut child) = self.child.take() else {
            return Ok(false);
        };
        if let Some(pid) = child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        match tokio::time::timeout(within, child.wait()).await {
            Ok(status) => Ok(status?.success()),
            Err(_) => {
                child.start_kill()?;
                child.wait().await?;
                anyhow::bail!("quire did not stop within {within:?} of SIGTERM")
            }
        }
    }

    /// Whether the child has exited on its own (a crash).
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The last lines of the log.
    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join(" | ")
    }

    /// Lines of the log that report a panic.
    pub(crate) fn panics(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("panicked"))
            .map(str::to_string)
            .collect()
    }
}

/// Whether `addr` answers `GET /_quire/health` with 200 within a second.
pub(crate) async fn healthy(addr: SocketAddr) -> bool {
    let probe = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET /_quire/health HTTP/1.1\r\nhost: chaos\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        Some(buf.starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), probe).await,
        Ok(Some(true))
    )
}

/// quire's Prometheus metrics (`GET /_quire/metrics` with the admin token): each
/// sample's name (labels included) and value; `None` if quire did not answer.
pub(crate) async fn metrics(addr: SocketAddr) -> Option<Vec<(String, f64)>> {
    let probe = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let req = format!(
            "GET /_quire/metrics HTTP/1.1\r\nhost: chaos\r\nauthorization: Bearer {ADMIN_TOKEN}\r\n\
             connection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    };
    let text = tokio::time::timeout(Duration::from_secs(5), probe)
        .await
        .ok()??;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then_some(())?;
    Some(
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                Some((name.to_string(), value.parse().ok()?))
            })
            .collect(),
    )
}

/// The value of metric `name` (without labels) in `m`.
pub(crate) fn metric(m: &[(String, f64)], name: &str) -> f64 {
    m.iter().find(|(n, _)| n == name).map_or(0.0, |&(_, v)| v)
}

/// A process's resident memory, KiB, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub(crate) struct Rss {
    /// `VmRSS`: everything resident, the volume's mapped pages included.
    pub(crate) total_kib: u64,
    /// `RssAnon`: the heap and stacks, what a leak grows.
    pub(crate) anon_kib: u64,
    /// `RssFile`: mapped files (the volume, the binary).
    file_kib: u64,
}

/// The resident memory of `pid`, if it is running.
pub(crate) fn rss(pid: u32) -> Option<Rss> {
    parse_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// The resident memory in a `/proc/PID/status` text.
fn parse_status(text: &str) -> Option<Rss> {
    let kib = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(Rss {
        total_kib: kib("VmRSS:")?,
        anon_kib: kib("RssAnon:")?,
        file_kib: kib("RssFile:").unwrap_or(0),
    })
}

/// A free loopback address (bound, then released for quire to take).
pub(crate) fn free_addr() -> anyhow::Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// The quire binary to drive: `given`, else `$CARGO_TARGET_DIR/release/quire`, else
/// `target/release/quire`.
pub(crate) fn find_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        anyhow::ensure!(p.is_file(), "--quire {}: no such file", p.display());
        return Ok(p.to_path_buf());
    }
    let mut tried = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        tried.push(PathBuf::from(dir).join("release/quire"));
    }
    tried.push(PathBuf::from("target/release/quire"));
    tried
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "no quire binary at {:?}: build it (cargo build --release -p quire) or pass --quire",
                tried
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_memory_lines_parse() {
        let text =
            "Name:\tquire\nVmRSS:\t  120000 kB\nRssAnon:\t   40000 kB\nRssFile:\t   79000 kB\n";
        assert_eq!(
            parse_status(text),
            Some(Rss {
                total_kib: 120_000,
                anon_kib: 40_000,
                file_kib: 79_000
            })
        );
        assert_eq!(parse_status("Name:\tx\n"), None);
    }
}
