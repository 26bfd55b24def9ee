//! The cluster suite's Redis: Debian's `redis-server` as a child process on a free
//! loopback port, in a directory of its own, with no persistence (`--save ""`,
//! `--appendonly no`), so a restart comes back empty as the `redis_loss` case
//! needs; commands go through `redis-cli`.
//!
//! Key decision: **a missing `redis-server` is a skip, not a failure**
//! ([`Redis::installed`]): the suite says so and judges nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, Command};

/// A running `redis-server`, killed on drop.
#[derive(Debug)]
pub(crate) struct Redis {
    pub(crate) port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Redis {
    /// Whether `redis-server` and `redis-cli` can be run; `Err` says which is missing.
    pub(crate) fn installed() -> Result<(), String> {
        for tool in ["redis-server", "redis-cli"] {
            let ran = std::process::Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if ran.is_err() {
                return Err(format!(
                    "{tool} is not installed (apt-get install redis-server)"
                ));
            }
        }
        Ok(())
    }

    /// Starts one on a free port with its files in `dir`.
    pub(crate) async fn start(dir: &Path) -> anyhow::Result<Redis> {
        std::fs::create_dir_all(dir)?;
        let port = crate::quire::free_addr()?.port();
        let mut r = Redis {
            port,
            dir: dir.to_path_buf(),
            child: None,
        };
        r.restart().await?;
        Ok(r)
    }

    /// Starts it (again) on the same port, empty; waits until it answers `PING`.
    pub(crate) async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill().await;
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting redis-server")?;
        self.child = Some(child);
        for _ in 0..300 {
            if self.cli(&["PING"]).await.is_ok_and(|r| r == "PONG") {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("redis-server on port {} did not answer PING", self.port)
    }

    /// Kills it, as a crash would (it keeps nothing).
    pub(crate) async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Runs one command with `redis-cli`; its output, trimmed.
    pub(crate) async fn cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = tokio::time::timeout(
            Duration::from_secs(5),
            Command::new("redis-cli")
                .args(["-p", &self.port.to_string()])
                .args(args)
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .context("redis-cli did not finish")??;
        anyhow::ensure!(out.status.success(), "redis-cli {args:?}: {}", out.status);
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}
